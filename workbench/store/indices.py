"""The names of the indices the workbench reads and writes (docs/contract.md, "Indices"), in one
place."""

from opensearchpy import OpenSearch
from opensearchpy.exceptions import NotFoundError

QUERY_SET_INDEX = "search-relevance-queryset"
SEARCH_CONFIG_INDEX = "search-relevance-search-config"
JUDGMENT_INDEX = "search-relevance-judgment"
EXPERIMENT_INDEX = ".plugins-search-relevance-experiment"
VARIANT_INDEX = "search-relevance-experiment-variant"
EVALUATION_INDEX = "search-relevance-evaluation-result"
JOBS_INDEX = ".search-relevance-scheduled-experiment-jobs"
HISTORY_INDEX = ".search-relevance-scheduled-experiment-history"
CACHE_INDEX = ".plugins-search-relevance-judgment-cache"
SETTINGS_INDEX = ".plugins-search-relevance-settings"
MODELS_INDEX = ".plugins-search-relevance-models"
EVALUATE_BATCH_INDEX = ".plugins-search-relevance-evaluate-batch"
AB_TEST_INDEX = ".plugins-search-relevance-ab-test"
#: monitors (a workbench extension, docs/differences.md): definitions, and one document per run
MONITOR_INDEX = "search-relevance-monitor"
MONITOR_RUN_INDEX = "search-relevance-monitor-run"
#: remote search configurations (issue 47): searches sent to another engine
REMOTE_CONFIG_INDEX = "search-relevance-remote-search-config"


# OpenSearch refuses to create an index with a longer name.
MAX_INDEX_NAME_BYTES = 255


def index_exists(client: OpenSearch, name: str) -> bool:
    """Whether a client-given index (or alias or pattern) exists for the current identity.

    Asked with an empty search rather than ``HEAD``: on a secured cluster a caller who may not
    search the index then gets the cluster's own 403 with its reason (a ``HEAD`` has no body).
    A name longer than any index can have does not exist, without asking: in a URL the cluster
    refuses it with a bodiless 400."""
    if len(name.encode("utf-8", "surrogatepass")) > MAX_INDEX_NAME_BYTES:
        return False
    try:
        client.search(index=name, body={"size": 0, "track_total_hits": False},
                      params={"allow_no_indices": "false"})
    except NotFoundError:
        return False
    return True
