"""Query sets generated from an index's own documents: the sample, the queries, the reference."""
