"""How the API is served: the gunicorn runner (``gunicorn_app``), the HAProxy ``front`` (its
configuration rendered by ``haproxy`` from ``haproxy.cfg.j2``), and the request-line rule gunicorn
applies and HAProxy's configuration mirrors (``request_target``)."""
