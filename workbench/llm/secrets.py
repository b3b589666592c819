"""API keys of models registered at run time, encrypted at rest with WORKBENCH_SECRET_KEY.

Fernet (AES-128-CBC + HMAC-SHA256, from ``cryptography``): the cluster only ever holds the
token. Several comma-separated keys allow rotation: the first encrypts, any of them decrypts
(MultiFernet), so a new key can be put first while tokens made with the old one still work.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

SETTING = "WORKBENCH_SECRET_KEY"


class SecretKeyMissing(Exception):
    """No WORKBENCH_SECRET_KEY: keys can be neither stored nor read."""


class UndecryptableKey(Exception):
    """The token was made with a key WORKBENCH_SECRET_KEY no longer holds (or is damaged)."""


class SecretBox:
    """Encrypts and decrypts API keys; safe to share between threads."""

    def __init__(self, secret_keys: str | None) -> None:
        keys = [k.strip() for k in (secret_keys or "").split(",") if k.strip()]
        self._fernet = MultiFernet([Fernet(k) for k in keys]) if keys else None

    @property
    def configured(self) -> bool:
        return self._fernet is not None

    def encrypt(self, api_key: str) -> str:
        if self._fernet is None:
            raise SecretKeyMissing(
                f"{SETTING} is not set: the workbench cannot store an API key without it "
                "(set it on every API process and worker, or name an environment variable "
                "holding the key in apiKeyEnv instead)")
        return self._fernet.encrypt(api_key.encode()).decode()

    def decrypt(self, token: str) -> str:
        if self._fernet is None:
            raise SecretKeyMissing(f"{SETTING} is not set, so the stored API key cannot be "
                                   "decrypted")
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except (InvalidToken, ValueError):
            raise UndecryptableKey(
                f"the stored API key cannot be decrypted with {SETTING} (was the key it was "
                "encrypted with removed? keep the old key after the new one while rotating)"
            ) from None
