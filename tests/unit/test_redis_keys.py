"""The Redis key strings never change: a rolling upgrade must find what the previous version
wrote (leases, queued markers, fan-out runs, budgets, counters)."""

from workbench import redis_keys as k
from workbench.jobs import fanout, leases
from workbench.llm import rate_limit


def test_job_keys_keep_their_strings() -> None:
    assert k.queued_key("t.x", "e1") == "workbench:queued:t.x:e1"
    assert k.lease_key("t.x", "e1") == "workbench:lease:t.x:e1"
    assert k.attempts_key("t.x", "e1") == "workbench:attempts:t.x:e1"
    assert k.cancel_key("e1") == "workbench:cancel:e1"
    assert k.supervisor_key("host", 42) == "workbench:supervisor:host:42"
    assert leases.lease_key is k.lease_key  # the modules use the registry's names


def test_fanout_and_budget_keys_keep_the_historical_prefix() -> None:
    keys = fanout.Keys("kind:e1:abc")
    assert keys.head == "wb:fan:kind:e1:abc:head"
    assert keys.all() == [f"wb:fan:kind:e1:abc:{n}"
                          for n in ("head", "units", "todo", "taken", "done", "stop", "tally")]
    assert k.budget_key("j1", "d" * 20) == "wb:budget:j1:" + "d" * 20


def test_other_keys_keep_their_strings() -> None:
    assert k.rate_limit_keys("m") == ("workbench:ratelimit:m:requests",
                                      "workbench:ratelimit:m:tokens",
                                      "workbench:ratelimit:m:pause")
    assert rate_limit.PREFIX == "workbench:ratelimit:"
    assert k.stat_key("s", "bucket:60000") == "workbench:stats:s:bucket:60000"
    assert k.stats_pattern() == "workbench:stats:*"
    assert k.idempotency_key("JUDGMENT", "e1") == "workbench:idempotency:JUDGMENT:e1"
    assert k.schedule_last_key("j") == "workbench:schedule:j:last"
    assert k.schedule_claim_key("j", 5, 7) == "workbench:schedule:j:5:7"
    assert k.CACHE_GENERATION_KEY == "workbench:cache:generation"
    assert k.remote_slots_key("r1") == "workbench:remote:slots:r1"
    assert k.remote_cache_key("r1", "ab") == "workbench:remote:cache:r1:ab"
    assert k.remote_cache_pattern("r1") == "workbench:remote:cache:r1:*"


def test_the_queued_since_set_names_jobs_as_task_and_entity() -> None:
    assert k.QUEUED_SINCE_KEY == "workbench:queued-since"
    assert k.queued_member("t.x", "e:1") == "t.x:e:1"
    assert k.queued_key_of_member("t.x:e:1") == k.queued_key("t.x", "e:1")
