"""A stored remote search configuration read back (workbench/remote/configs.py): the password
decrypted, or the configuration marked unusable with the reason; what a signature reads."""

from __future__ import annotations

from cryptography.fernet import Fernet

from workbench.llm.secrets import SecretBox
from workbench.remote.client import headers, shown_url
from workbench.remote.configs import from_document
from workbench.remote.mapping import PRESETS
from workbench.remote.templates import RenderedRequest

KEY = Fernet.generate_key().decode()
DOC = {"id": "r1", "name": "staging", "description": "", "connectionUrl": "http://h:9200/p/_search",
       "username": "reader", "queryTemplate": '{"q": "%SearchText%"}',
       "responseTemplate": "solr", "maxRequestsPerSecond": 0.5, "maxConcurrentRequests": 2,
       "cacheDurationMinutes": 0, "refreshCache": True, "metadata": {"a": 1},
       "timestamp": "2026-11-29T10:00:00.000Z", "passwordSet": True}


def test_the_password_is_decrypted_and_every_field_read() -> None:
    box = SecretBox(KEY)
    config = from_document({**DOC, "passwordEncrypted": box.encrypt("s3cret")}, box)
    assert (config.id, config.password, config.username, config.mapping) == \
        ("r1", "s3cret", "reader", PRESETS["solr"])
    assert (config.max_requests_per_second, config.max_concurrent_requests,
            config.cache_duration_minutes, config.refresh_cache, config.metadata) == \
        (0.5, 2, 0, True, {"a": 1})
    assert config.unusable is None
    assert "s3cret" not in repr(config)
    assert config.definition() == {"connectionUrl": "http://h:9200/p/_search",
                                   "username": "reader", "queryTemplate": '{"q": "%SearchText%"}',
                                   "responseTemplate": "solr"}


def test_a_password_that_cannot_be_decrypted_makes_it_unusable() -> None:
    token = SecretBox(KEY).encrypt("s3cret")
    other = from_document({**DOC, "passwordEncrypted": token},
                          SecretBox(Fernet.generate_key().decode()))
    assert other.password is None
    assert other.unusable == (
        "the stored password cannot be decrypted with WORKBENCH_SECRET_KEY (was the key it "
        "was encrypted with removed? keep the old key after the new one while rotating)")
    none = from_document({**DOC, "passwordEncrypted": token}, SecretBox(None))
    assert none.unusable == ("WORKBENCH_SECRET_KEY is not set, so the stored password cannot "
                             "be decrypted")


def test_defaults_of_a_sparse_document() -> None:
    config = from_document({"id": "x", "name": "n", "connectionUrl": "http://h/s",
                            "queryTemplate": "q=%SearchText%"}, SecretBox(None))
    assert (config.max_requests_per_second, config.max_concurrent_requests,
            config.cache_duration_minutes, config.refresh_cache, config.preset) == \
        (10.0, 5, 60, False, "opensearch")


def test_basic_auth_and_urls_shown_without_credentials() -> None:
    box = SecretBox(KEY)
    config = from_document({**DOC, "passwordEncrypted": box.encrypt("pw")}, box)
    assert headers(config, RenderedRequest("POST", "http://h", b"{}")) == {
        "Accept": "application/json", "Content-Type": "application/json",
        "authorization": "Basic cmVhZGVyOnB3"}  # base64 of reader:pw
    assert shown_url("https://u:pw@h:9200/p?q=1") == "https://h:9200/p?q=1"
    assert shown_url("http://h/p") == "http://h/p"
