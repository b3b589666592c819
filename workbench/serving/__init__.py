"""How the API is served: the gunicorn runner (``gunicorn_app``), the nginx ``front`` and the
``door`` in front of it, the request-line rule both fronts share (``request_target``), and the
request and answer rules every route relies on (``request_json``, ``filter_path``)."""
