"""Alarm rules evaluated over observations with an injected clock: when each kind fires,
that a lasting condition is reported once, and that it resolves once."""

from __future__ import annotations

from dataclasses import replace

from manager.alarms import FIRING, RESOLVED, Alarm, AlarmEvaluator, Facts, PipelineFact
from shared.alarmrules import AlarmRule


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def pipeline(pid: str = "shop.forward", **values: object) -> PipelineFact:
    fields: dict[str, object] = {"channel": pid.split(".")[0], "channel_status": "START",
                                 "state": "running"}
    fields.update(values)
    return PipelineFact(pid, **fields)  # type: ignore[arg-type]


def facts(*pipelines: PipelineFact, nodes: tuple[int, ...] = (1,)) -> Facts:
    return Facts(tuple(pipelines), frozenset(nodes))


def changes(found: list[Alarm]) -> list[tuple[str, str, str]]:
    return [(alarm.rule, alarm.subject, alarm.state) for alarm in found]


def test_delay_fires_after_lasting_for_s_once_and_resolves_once() -> None:
    clock = Clock()
    rules = [AlarmRule("slow", "delay", above=5000, for_s=30)]
    alarms = AlarmEvaluator(rules, clock)
    behind = facts(pipeline(delay_ms=7000))
    assert alarms.evaluate(behind) == []  # starts the 30 s
    clock.advance(29)
    assert alarms.evaluate(behind) == []
    clock.advance(1)
    fired = alarms.evaluate(behind)
    assert changes(fired) == [("slow", "shop.forward", FIRING)]
    assert fired[0].since_ms == 1_000_000  # when the delay was first seen above
    assert fired[0].message == ("pipeline shop.forward is 7 s behind the source "
                                "(above 5 s for 30 s)")
    for _ in range(10):  # still behind: nothing new, no storm
        clock.advance(5)
        assert alarms.evaluate(behind) == []
    clock.advance(1)
    resolved = alarms.evaluate(facts(pipeline(delay_ms=5000)))  # at the threshold: not above
    assert changes(resolved) == [("slow", "shop.forward", RESOLVED)]
    assert resolved[0].resolved_ms == int(clock.now * 1000)
    assert alarms.firing == {} and list(alarms.resolved) == resolved
    assert alarms.evaluate(facts(pipeline(delay_ms=0))) == []


def test_a_delay_that_dips_below_restarts_the_wait() -> None:
    clock = Clock()
    alarms = AlarmEvaluator([AlarmRule("slow", "delay", above=1000, for_s=10)], clock)
    alarms.evaluate(facts(pipeline(delay_ms=2000)))
    clock.advance(8)
    alarms.evaluate(facts(pipeline(delay_ms=10)))
    clock.advance(1)
    assert alarms.evaluate(facts(pipeline(delay_ms=2000))) == []
    clock.advance(9)
    assert alarms.evaluate(facts(pipeline(delay_ms=2000))) == []
    clock.advance(1)
    assert changes(alarms.evaluate(facts(pipeline(delay_ms=2000)))) == [
        ("slow", "shop.forward", FIRING)]


def test_delay_counts_only_running_pipelines_it_matches() -> None:
    alarms = AlarmEvaluator([AlarmRule("slow", "delay", above=0, pipelines=("shop.*",))],
                            Clock())
    assert changes(alarms.evaluate(facts(
        pipeline("shop.forward", delay_ms=5), pipeline("shop.back", state="not running",
                                                       delay_ms=99),
        pipeline("crm.forward", delay_ms=99)))) == [("slow", "shop.forward", FIRING)]


def test_paused_channel_and_failed_pipeline_say_why() -> None:
    clock = Clock()
    alarms = AlarmEvaluator([AlarmRule("paused", "paused"), AlarmRule("failed", "failed")],
                            clock)
    failed = pipeline(channel_status="PAUSE", state="failed",
                      last_error="stage load, processId 7: Table 'x' doesn't exist\nmore")
    found = alarms.evaluate(facts(failed, pipeline("crm.forward", channel_status="PAUSE",
                                                   state="not running")))
    assert [(a.rule, a.subject, a.message) for a in found] == [
        ("paused", "shop", "channel shop is paused: stage load, processId 7: Table 'x' "
                           "doesn't exist"),
        ("paused", "crm", "channel crm is paused (by an operator: no pipeline reports an "
                          "error)"),
        ("failed", "shop.forward", "pipeline shop.forward failed: stage load, processId 7: "
                                   "Table 'x' doesn't exist")]
    clock.advance(60)
    assert alarms.evaluate(facts(failed, pipeline("crm.forward", channel_status="PAUSE",
                                                  state="not running"))) == []
    started = alarms.evaluate(facts(pipeline(), pipeline("crm.forward")))
    assert changes(started) == [("paused", "shop", RESOLVED), ("paused", "crm", RESOLVED),
                                ("failed", "shop.forward", RESOLVED)]


def test_a_subscription_pausing_for_its_reader_is_failed_not_late() -> None:
    """``pausing``: a subscription's error, waiting for its reader's acknowledgements
    before the pause; the failed alarm fires at once, a delay alarm does not wait on it."""
    alarms = AlarmEvaluator([AlarmRule("failed", "failed"),
                             AlarmRule("late", "delay", above=1000)], Clock())
    found = alarms.evaluate(facts(pipeline(state="pausing", last_error="TRUNCATE\nwaits",
                                           delay_ms=5000)))
    assert [(a.rule, a.subject, a.message) for a in found] == [
        ("failed", "shop.forward", "pipeline shop.forward failed: TRUNCATE")]


def test_node_lost_watches_nodes_seen_and_nodes_listed() -> None:
    clock = Clock()
    seen = AlarmEvaluator([AlarmRule("lost", "node_lost", for_s=5)], clock)
    listed = AlarmEvaluator([AlarmRule("lost", "node_lost", nodes=(1, 3))], clock)
    assert changes(listed.evaluate(facts(nodes=(1, 2)))) == [("lost", "3", FIRING)]
    assert seen.evaluate(facts(nodes=(1, 2))) == []
    assert seen.evaluate(facts(nodes=(1,))) == []  # gone, for_s not over yet
    clock.advance(5)
    lost = seen.evaluate(facts(nodes=(1,)))
    assert changes(lost) == [("lost", "2", FIRING)]
    assert lost[0].message.startswith("node 2 is not registered")
    assert changes(listed.evaluate(facts(nodes=(1, 3)))) == [("lost", "3", RESOLVED)]
    assert changes(seen.evaluate(facts(nodes=(1, 2)))) == [("lost", "2", RESOLVED)]


def test_a_pipeline_failing_and_retrying_hours_behind_raises_the_delay_alarm() -> None:
    """Each attempt loads a little, so the pipeline never pauses; it runs a few seconds,
    fails, retries. The delay rule judged 'running' only and every 'retrying' poll reset
    its for_s: hours behind, it never fired. Retrying is judged too, and a moment with no
    owner (a failover) neither resolves a firing alarm nor restarts one on its way."""
    clock = Clock()
    alarms = AlarmEvaluator([AlarmRule("slow", "delay", above=10_000, for_s=30),
                             AlarmRule("stuck", "not_running", for_s=120)], clock)
    found = []
    for poll in range(300):  # ten minutes polled every 2 s, 'retrying' one poll in ten
        state = "retrying" if poll % 10 == 9 else "running"
        found += changes(alarms.evaluate(facts(pipeline(state=state,
                                                        delay_ms=3 * 3600 * 1000))))
        clock.advance(2)
    assert found == [("slow", "shop.forward", FIRING)]
    behind = 3 * 3600 * 1000
    for state in ("not running", "stopping", "starting", "switching"):  # blips
        assert alarms.evaluate(facts(pipeline(state=state, delay_ms=behind))) == []
        clock.advance(2)
    assert changes(alarms.evaluate(facts(pipeline(state="retrying", delay_ms=0)))) == [
        ("slow", "shop.forward", RESOLVED)]  # caught up


def test_a_delay_alarm_on_its_way_keeps_its_count_through_a_moment_without_owner() -> None:
    clock = Clock()
    alarms = AlarmEvaluator([AlarmRule("slow", "delay", above=10_000, for_s=30)], clock)
    behind = pipeline(delay_ms=60_000)
    assert alarms.evaluate(facts(behind)) == []
    clock.advance(20)
    assert alarms.evaluate(facts(pipeline(state="not running"))) == []  # failing over
    clock.advance(10)
    assert changes(alarms.evaluate(facts(behind))) == [("slow", "shop.forward", FIRING)]
    # the new owner starting, before its first batch: no delay to tell yet, not caught up
    assert alarms.evaluate(facts(pipeline(state="starting", delay_ms=0))) == []
    assert changes(alarms.evaluate(facts(pipeline(state="not running",
                                                  channel_status="PAUSE")))) == [
        ("slow", "shop.forward", RESOLVED)]  # paused: the paused rule tells it now


def test_free_door_rejects_above_n_within_the_window() -> None:
    clock = Clock()
    alarms = AlarmEvaluator([AlarmRule("rejects", "free_door_rejects", above=3,
                                       within_s=60)], clock)
    for rejected in (10, 12, 13):  # 10 before the manager looked: not counted
        assert alarms.evaluate(facts(pipeline(rejected=rejected))) == []
        clock.advance(10)
    fired = alarms.evaluate(facts(pipeline(rejected=14)))
    assert changes(fired) == [("rejects", "shop.forward", FIRING)]
    assert "rejected 4 free-door request(s) in the last 60 s (above 3)" in fired[0].message
    clock.advance(10)
    assert alarms.evaluate(facts(pipeline(rejected=2))) == []  # restarted: 2 more counted
    clock.advance(61)
    assert changes(alarms.evaluate(facts(pipeline(rejected=2)))) == [
        ("rejects", "shop.forward", RESOLVED)]


def test_rows_skipped_fires_as_soon_as_the_count_grows() -> None:
    """skip_load_exception drops rows the target refuses: each skip must reach an operator,
    not only the node's log (status showed none of them)."""
    clock = Clock()
    alarms = AlarmEvaluator([AlarmRule("skips", "rows_skipped", within_s=60)], clock)
    assert alarms.evaluate(facts(pipeline(skipped=5))) == []  # before the manager looked
    clock.advance(10)
    assert alarms.evaluate(facts(pipeline(skipped=5))) == []  # none since
    clock.advance(10)
    fired = alarms.evaluate(facts(pipeline(skipped=7)))
    assert changes(fired) == [("skips", "shop.forward", FIRING)]
    assert "skipped 2 row(s) its target refused" in fired[0].message
    assert "event=row_skipped" in fired[0].message
    clock.advance(61)
    assert changes(alarms.evaluate(facts(pipeline(skipped=7)))) == [
        ("skips", "shop.forward", RESOLVED)]


def test_a_new_leader_restores_what_fires_without_sending_it_again() -> None:
    clock = Clock()
    rules = [AlarmRule("slow", "delay", above=100), AlarmRule("lost", "node_lost")]
    first = AlarmEvaluator(rules, clock)
    fired = first.evaluate(facts(pipeline(delay_ms=500), nodes=(1, 2)))
    fired += first.evaluate(facts(pipeline(delay_ms=500), nodes=(1,)))
    assert changes(fired) == [("slow", "shop.forward", FIRING), ("lost", "2", FIRING)]
    successor = AlarmEvaluator(rules, clock)  # never saw node 2
    successor.restore(first.firing.values(),
                      [replace(fired[0], rule="dropped", state=RESOLVED)])
    assert successor.evaluate(facts(pipeline(delay_ms=900), nodes=(1,))) == []
    assert changes(successor.evaluate(facts(pipeline(delay_ms=0), nodes=(1, 2)))) == [
        ("slow", "shop.forward", RESOLVED), ("lost", "2", RESOLVED)]
    assert [alarm.rule for alarm in successor.resolved] == ["lost", "slow", "dropped"]


def test_restore_drops_alarms_of_rules_no_longer_configured() -> None:
    alarms = AlarmEvaluator([AlarmRule("slow", "delay", above=100)], Clock())
    alarms.restore([Alarm("gone", "paused", "shop", 1, "x")])
    assert alarms.firing == {}


def test_an_alarm_travels_as_protobuf_unchanged() -> None:
    alarm = Alarm("slow", "delay", "shop.forward", 123, "behind", RESOLVED, 456)
    assert Alarm.from_proto(alarm.to_proto()) == alarm


def test_source_switch_fires_while_the_primary_is_lost_and_after_a_switch() -> None:
    clock = Clock()
    alarms = AlarmEvaluator([AlarmRule("moved", "source_switch", within_s=300)], clock)
    waiting = pipeline(state="switching", last_error="pipeline shop.forward: source shop's "
                       "primary db1:3306 does not answer; setl switches ... 8 s more")
    fired = alarms.evaluate(facts(waiting))
    assert changes(fired) == [("moved", "shop.forward", FIRING)]
    assert "does not answer" in fired[0].message
    clock.advance(10)
    switched = pipeline(switched="switched from db1:3306 to db2:3306 (auto) at GTID 0-1-9",
                        switched_ms=int(clock.now * 1000))
    assert alarms.evaluate(facts(switched)) == []  # still firing: the switch is its news
    clock.advance(301)
    assert changes(alarms.evaluate(facts(switched))) == [("moved", "shop.forward", RESOLVED)]
    assert alarms.evaluate(facts(pipeline())) == []  # never switched: nothing


def test_not_running_fires_for_a_started_channel_s_pipeline_nobody_runs() -> None:
    clock = Clock()
    alarms = AlarmEvaluator([AlarmRule("stalled", "not_running", for_s=120)], clock)
    orphan = facts(pipeline(state="not running"), pipeline("shop.back", state="running"),
                   pipeline("idle.forward", channel_status="STOP", state="not running"),
                   pipeline("held.forward", channel_status="PAUSE", state="failed"))
    assert alarms.evaluate(orphan) == []  # a start, a failover: not yet
    clock.advance(119)
    assert alarms.evaluate(orphan) == []
    clock.advance(1)
    fired = alarms.evaluate(orphan)  # a stopped or paused channel's pipelines are not stuck
    assert changes(fired) == [("stalled", "shop.forward", FIRING)]
    assert fired[0].since_ms == 1_000_000
    assert fired[0].message == ("pipeline shop.forward is not running, its channel shop "
                                "started: no node holds it")
    clock.advance(60)
    assert alarms.evaluate(orphan) == []  # once
    resolved = alarms.evaluate(facts(pipeline(state="running")))
    assert changes(resolved) == [("stalled", "shop.forward", RESOLVED)]


def test_not_running_watches_a_start_that_keeps_failing_and_says_why() -> None:
    clock = Clock()
    alarms = AlarmEvaluator([AlarmRule("stalled", "not_running", for_s=60)], clock)
    retrying = facts(pipeline(state="retrying", last_error="stage load: target down\nmore"))
    assert alarms.evaluate(retrying) == []
    clock.advance(30)  # starting again, still not running: the wait goes on
    assert alarms.evaluate(facts(pipeline(state="starting"))) == []
    clock.advance(30)
    fired = alarms.evaluate(retrying)
    assert [alarm.message for alarm in fired] == [
        "pipeline shop.forward is retrying, its channel shop started: stage load: target down"]
    clock.advance(5)
    assert changes(alarms.evaluate(facts(pipeline(channel_status="STOP", state="stopped")))) \
        == [("stalled", "shop.forward", RESOLVED)]  # stopped on purpose: not stuck
