"""LLM_JUDGMENT: the job (``job``: retrieve, reuse, chunk, ask the model, parse) and its split over
every free worker (``split``), what the judge is sent (``prompt``) in chunks of hits
(``chunking``), how its answers are read (``parse``), and what the calls cost (``cost``), also
before they are made (``estimate``)."""
