"""The demo data that ships with the package, and ``workbench load-demo``, which loads it."""
