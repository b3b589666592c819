"""Judgment holes: the pairs an experiment's configurations retrieved that its judgment lists
leave unrated, pooled over every configuration, and the job that rates only those
(docs/holes.md, "Filling an experiment's holes")."""
