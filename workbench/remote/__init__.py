"""Remote search configurations (issue 47): searches sent to another engine — another
OpenSearch or Elasticsearch cluster, Solr, or any JSON search API — and their answers mapped to
OpenSearch-shaped hits, so that experiments and judgments can use them beside local search
configurations. ``search`` is the interface the other packages use."""
