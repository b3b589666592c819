"""The ``workbench`` command (``main``: argparse entry point and the server-side commands) and
the daily loop over a running server (``loop``, with its file ``formats``, the CI ``gate``, what
it shows in ``output`` and the HTTP ``client`` it talks through)."""
