"""The live A/B search: ``POST /_plugins/_search_relevance/ab_tests/{id}/_search`` answered by one
asyncio process beside gunicorn, behind the HAProxy front (docs/front.md, "The live A/B search").

Why a process of its own: the interleaved search is the one route that serves end users' traffic,
and through gunicorn and Flask it spent about 2 ms of Python per search on hooks, the WSGI
layers, a thread per request and a new look at every header, against 0.67 ms for the cluster's own
work (py-spy under ``workbench bench --only ab_search``). This process does only what that search
needs, on one event loop, with kept-alive connections to the cluster (through the front's own
cluster backend, so TLS, several nodes and their health checks stay in one place) and orjson.

It answers exactly as the Flask route would, by doing less only where the answer cannot differ:
the plugin's checks (``abtests.serving.plan``), the merge (``abtests.serving.merge``), the body's
schema and limits, the caller's identity and the kept settings and definitions are the same code.
Every request it cannot answer that way (an error to report, a query string, another content
type, a caller or a generation it has not seen yet...) is sent on to gunicorn unchanged, and
gunicorn's answer goes back as it is: one place for every error.
"""
