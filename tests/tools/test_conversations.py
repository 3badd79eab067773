"""Issue 63: a simulated user in the loop. The built-in mock plays both sides (the user from each
case's script, the agent from the user's words), each cell a conversation run through the real
runner and store: who said what, who stopped, the user's view, its costs apart, its errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

import evalhydra
from evalhydra.core.errors import EvalHydraError
from evalhydra.execute.user_side import user_view
from tests.conftest import smoke_eval, write_registry
from tests.helpers import query_rows

REGISTRY = Path(__file__).resolve().parents[2] / "registry"


def _talk(tmp_path: Path, *overrides: str, registry: Path | None = None,
          eval_id: str = "users.order_desk_chat") -> evalhydra.EvalResult:
    store = tmp_path / "s.db"
    where = [f"registry={registry}"] if registry else []
    return evalhydra.evaluate([*where, f"eval={eval_id}", f"store.path={store}",
                               f"hydra.run.dir={tmp_path / 'out'}", *overrides])


def _scripted(tmp_path: Path, turns: list[str], user: dict[str, Any] | None = None,
              **script: Any) -> Path:
    """A registry of one conversation eval (exact_match on the agent's last words), one case."""
    script = {"turns": turns, **script}
    case = {"id": "c1", "ideal": "done", "user": {"persona": "You are Ana.", "script": script}}
    spec = smoke_eval("talk.e", "data/talk/test.jsonl", user=user or {})
    return write_registry(tmp_path / "reg", evals={"talk/e.json": spec},
                          data={"data/talk/test.jsonl": json.dumps(case) + "\n"})


def _trajectories(store: Path, columns: str = "", **paths: str) -> list[dict[str, Any]]:
    """Each result's ``columns`` and, for each name, its ``details.trajectory.<path>``."""
    picked = [f"json_extract(details, '$.trajectory.{path}') as {name}" for name, path in paths.items()]
    return query_rows(store, f"select {', '.join([c for c in [columns] if c] + picked)} from results")


def test_the_order_desk_conversation_runs_offline_and_each_side_is_in_sql(tmp_path: Path) -> None:
    result = _talk(tmp_path)
    assert result.exit_code == 0 and [s["passed"] for s in result.stats] == [10]
    store = tmp_path / "s.db"
    turns = query_rows(store, "select side, turn, calls, stop_reason from turns where case_id = 'refund-7'"
                              " order by rowid")
    sides = [(t["side"], t["turn"]) for t in turns]
    assert sides == [("user", 1), ("agent", 1), ("agent", 2), ("user", 2), ("agent", 3), ("agent", 4),
                     ("user", 3)]
    assert {t["stop_reason"] for t in turns} == {"user_stop"}
    calls = query_rows(store, "select side, name from tool_calls where case_id = 'refund-7'")
    assert calls == [{"side": "agent", "name": "lookup_order"}, {"side": "agent", "name": "refund"}]
    user = json.loads(query_rows(store, "select json_extract(details, '$.trajectory.user') as u from results"
                                        " where case_id = 'refund-7'")[0]["u"])
    assert user["stopped_by"] == "user" and user["requests"] == 3 and user["prompt_tokens"] > 0
    assert len(user["simulator_digest"]) == 16 and user["simulator"]["stop_signals"][0] == "###STOP###"
    cells = "select cell_key from results where case_id = 'refund-7'"
    labels = {r["call"] for r in query_rows(store, f"select call from attempts where cell_key in ({cells})")}
    assert labels == {"turn1", "turn2", "turn3", "turn4", "user1", "user2", "user3"}


def test_the_user_never_sees_the_agents_prompt_calls_or_tool_results() -> None:
    transcript = [{"role": "system", "content": "POLICY: refunds need a reason."},
                  {"role": "assistant", "content": "Hi! How can I help you today?"},
                  {"role": "user", "content": "Refund order 7."},
                  {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1_0", "type": "function",
                   "function": {"name": "lookup_order", "arguments": "{\"order_id\": 7}"}}]},
                  {"role": "tool", "tool_call_id": "call_1_0", "content": "order 7: SECRET-STATE"},
                  {"role": "assistant", "content": "Shall I refund it?"}]
    view = user_view("You are Sam.", transcript)
    assert view == [{"role": "system", "content": "You are Sam."},
                    {"role": "user", "content": "Hi! How can I help you today?"},
                    {"role": "assistant", "content": "Refund order 7."},
                    {"role": "user", "content": "Shall I refund it?"}]
    assert "SECRET" not in json.dumps(view) and "POLICY" not in json.dumps(view)


@pytest.mark.slow
def test_a_premature_stop_fails_the_cell_and_is_another_simulator(tmp_path: Path) -> None:
    clean = _talk(tmp_path)
    broken = _talk(tmp_path, "+eval.user.mock.error_rate=1.0")
    assert [s["passed"] for s in broken.stats] == [0]
    store = tmp_path / "s.db"
    rows = _trajectories(store, "run_id, cell_key", stop="stop_reason", refunds="state.refund_count",
                         sim="user.simulator_digest")
    by_run = {run: [r for r in rows if r["run_id"] == run] for run in (clean.run_id, broken.run_id)}
    assert {r["stop"] for r in by_run[broken.run_id]} == {"user_stop"}
    assert {r["refunds"] for r in by_run[broken.run_id]} == {0}
    assert not {r["cell_key"] for r in by_run[clean.run_id]} & {r["cell_key"] for r in by_run[broken.run_id]}
    assert len({r["sim"] for r in rows}) == 2  # the simulator's identity says which played


@pytest.mark.parametrize(("turns", "stop"), [
    (["I want a human. ###TRANSFER###"], "user_transfer"),
    (["Do you sell cars? ###OUT-OF-SCOPE###"], "user_out_of_scope"),
])
def test_transfer_and_out_of_scope_end_the_conversation(tmp_path: Path, turns: list[str], stop: str) -> None:
    _talk(tmp_path, registry=_scripted(tmp_path, turns), eval_id="talk.e")
    rows = _trajectories(tmp_path / "s.db", stop="stop_reason", who="user.stopped_by")
    assert rows == [{"stop": stop, "who": "user"}]


def test_the_users_turn_limit_is_a_scored_outcome(tmp_path: Path) -> None:
    registry = _scripted(tmp_path, ["Say hello. Reply with exactly hello.", "Reply with exactly done."],
                         user={"max_turns": 1})
    result = _talk(tmp_path, registry=registry, eval_id="talk.e")
    rows = _trajectories(tmp_path / "s.db", "passed, error_kind, output", stop="stop_reason")
    assert rows == [{"passed": 0, "error_kind": None, "output": "hello", "stop": "user_turn_limit"}]
    assert result.stats[0]["errors"] == 0  # a failure, not an infrastructure error


def test_stop_when_ends_the_conversation_once_the_agent_says_it(tmp_path: Path) -> None:
    registry = _scripted(tmp_path, ["Reply with exactly done.", "Reply with exactly more."], stop_when="DONE")
    result = _talk(tmp_path, registry=registry, eval_id="talk.e")
    assert [s["passed"] for s in result.stats] == [1]
    turns = query_rows(tmp_path / "s.db", "select side from turns order by rowid")
    assert [t["side"] for t in turns] == ["user", "agent", "user"]


def test_the_cases_own_first_message_is_the_users_first(tmp_path: Path) -> None:
    case = {"id": "c1", "input": "Reply with exactly done.", "ideal": "done",
            "user": {"script": {"turns": ["(unused: the case said it)"]}}}
    registry = write_registry(tmp_path / "reg", evals={"talk/e.json": smoke_eval("talk.e", "data/t.jsonl",
                                                                                   user={})},
                              data={"data/t.jsonl": json.dumps(case) + "\n"})
    result = _talk(tmp_path, registry=registry, eval_id="talk.e")
    assert [s["passed"] for s in result.stats] == [1]
    transcript = json.loads(_trajectories(tmp_path / "s.db", t="transcript")[0]["t"])
    assert transcript[0] == {"role": "user", "content": "Reply with exactly done."}
    assert transcript[-1]["content"] == "###STOP###"  # the user's next turn is past its script


@pytest.mark.parametrize(("user", "message"), [
    ({"max_turn": 3}, "user.max_turn is not a simulated-user setting"),
    ({"max_turns": 0}, "user.max_turns=0"),
    ({"mock": {"error_kinds": ["premature"]}}, "'premature' is not an error kind"),
    ({"mock": {"error_rate": 1.5}}, "user.mock.error_rate=1.5"),
    ({"service": "nope"}, "user.service=nope: there is no service of that name"),
    ({"stop_signals": []}, "user.stop_signals must be a non-empty list"),
])
def test_a_bad_user_node_is_refused_before_any_call(tmp_path: Path, user: dict[str, Any],
                                                     message: str) -> None:
    with pytest.raises(EvalHydraError, match=message.replace("(", r"\(").replace(".", r"\.")):
        _talk(tmp_path, registry=_scripted(tmp_path, ["hi"], user=user), eval_id="talk.e")


def test_the_user_can_be_another_service(tmp_path: Path) -> None:
    user = {"service": "mock_judge", "model": "sim-1"}
    registry = _scripted(tmp_path, ["Reply with exactly done."], user=user)
    result = _talk(tmp_path, registry=registry, eval_id="talk.e")
    assert [s["passed"] for s in result.stats] == [1]
    sim = json.loads(_trajectories(tmp_path / "s.db", s="user.simulator")[0]["s"])
    assert sim["service"] == "mock_judge" and sim["model"] == "sim-1"


@pytest.mark.slow
def test_compare_refuses_sides_whose_simulators_differ_unless_told(tmp_path: Path) -> None:
    import sqlite3

    from evalhydra.analysis.comparison import Target, compare

    strong, weak = _talk(tmp_path), _talk(tmp_path, "+eval.user.mock.error_rate=0.3")
    same = _talk(tmp_path, "trials=1", "run.fresh=true")  # the strong simulator again
    assert strong.run_id and weak.run_id and same.run_id
    conn = sqlite3.connect(tmp_path / "s.db")
    base, cand, again = (Target(r, (r,)) for r in (strong.run_id, weak.run_id, same.run_id))
    with pytest.raises(EvalHydraError, match=r"simulated users differ \(users\.order_desk_chat: mock .*"
                                             r"\"rate\": 0\.0.* → .*\"rate\": 0\.3"):
        compare(conn, base, cand)
    allowed = compare(conn, base, cand, allow_simulator_change=True)
    assert allowed.overall["baseline_pass_rate"] > allowed.overall["candidate_pass_rate"]
    assert compare(conn, base, again).overall["candidate_pass_rate"] == 1.0  # same simulator: compared


def test_the_tau2_domain_scores_as_tau2_bench_does(tmp_path: Path) -> None:
    result = _talk(tmp_path, eval_id="users.order_desk_tau2")
    assert [(s["n"], s["passed"]) for s in result.stats] == [(17, 17)]
    rows = _trajectories(tmp_path / "s.db", "case_id", stop="stop_reason")
    assert {r["stop"] for r in rows if r["case_id"] != "transfer_1"} == {"user_stop"}
    assert [r["stop"] for r in rows if r["case_id"] == "transfer_1"] == ["user_transfer"]
    bases = query_rows(tmp_path / "s.db", "select case_id, json_extract(details, '$.reward_breakdown') as b,"
                                          " judge_service from results where case_id in ('late_refund_1',"
                                          " 'refund_new_order')  order by case_id")
    assert json.loads(bases[0]["b"]) == {"DB": 1.0, "COMMUNICATE": 1.0, "NL_ASSERTION": 1.0}
    assert bases[0]["judge_service"] == "mock_judge"
    assert json.loads(bases[1]["b"]) == {"DB": 1.0, "COMMUNICATE": 1.0, "ENV_ASSERTION": 1.0}


def test_a_weak_simulator_lowers_the_tau2_score_of_the_same_agent(tmp_path: Path) -> None:
    weak = _talk(tmp_path, "+eval.user.mock.error_rate=0.5", eval_id="users.order_desk_tau2")
    assert 0 < weak.stats[0]["passed"] < 17
    failed = _trajectories(tmp_path / "s.db", "passed", stop="stop_reason", who="user.stopped_by")
    assert {(r["stop"], r["who"]) for r in failed if not r["passed"]} <= {("user_stop", "user")}


@pytest.mark.slow
def test_a_weak_simulator_moves_the_raw_score_but_not_the_corrected_one(tmp_path: Path) -> None:
    """Issue 63, item 6: the same agent on the τ² order desk, 5 trials a task, with a strong mock
    simulator and a weak one (premature stops in 40 % of conversations). Every conversation is
    audited with the truth a person reads off it (the user never said its last scripted turn)."""
    from evalhydra.analysis.simulator_audit import simulator_corrections
    from evalhydra.store.audits import save_audit, transcript_sha256
    from evalhydra.store.db import immediate, open_store

    tasks = {t["id"]: t for t in json.loads(
        (REGISTRY / "data/users/order_desk_tau2/tasks.json").read_text())}
    from evalhydra.reports.writer import write_run_reports
    from tests.viewer.test_viewer import base_of, start_viewer, stop

    rates, hat, run_ids = {}, {}, {}
    for name, error_rate in (("strong", 0.0), ("weak", 0.4)):
        result = _talk(tmp_path / name, "trials=5", f"+eval.user.mock.error_rate={error_rate}",
                       eval_id="users.order_desk_tau2")
        store = open_store(tmp_path / name / "s.db")
        cells = store.conn.execute("select case_id, json_extract(details, '$.trajectory.transcript')"
                                   " from results").fetchall()
        with immediate(store.conn):
            for case_id, transcript in cells:
                said = [m["content"] for m in json.loads(transcript) if m["role"] == "user"]
                broke = tasks[case_id]["mock_script"]["turns"][-1] not in said
                save_audit(store.conn, {"eval": "users.order_desk_tau2", "case": case_id, "broke": broke,
                                        "kind": "premature_stop" if broke else None,
                                        "transcript_sha256": transcript_sha256(transcript)}, "truth")
        (row,) = simulator_corrections(store.conn, [result.run_id])
        write_run_reports(store, [result.run_id], tmp_path / name / "report", "json,md", cumulative=False)
        store.close()
        rates[name] = (row["raw_pass_rate"], row["corrected_pass_rate"])
        hat[name] = row["pass_hat_k"]["2"]
        run_ids[name] = result.run_id
    assert rates["strong"][0] - rates["weak"][0] >= 0.15
    assert abs(rates["strong"][1] - rates["weak"][1]) <= 0.03
    raw_gap = hat["strong"]["raw"] - hat["weak"]["raw"]  # both trials unbroken: 0.36 of pairs
    assert raw_gap >= 0.3 and abs(hat["strong"]["corrected"] - hat["weak"]["corrected"]) <= raw_gap / 4
    assert hat["weak"]["ci_low"] <= hat["strong"]["corrected"] <= hat["weak"]["ci_high"]
    (target,) = json.loads((tmp_path / "weak/report/trials.json").read_text())["targets"]
    assert target["simulator_corrected"]["pass_hat_k"]["2"] == hat["weak"]
    assert target["simulator_corrected"]["pass_rate"] == rates["weak"][1]
    report = (tmp_path / "weak/report/report.md").read_text()
    assert "## Simulated users" in report and f"{hat['weak']['raw']:.3f}" in report
    proc, url = start_viewer(tmp_path / "weak" / "s.db")
    try:
        with httpx.Client(base_url=base_of(url), follow_redirects=True) as client:
            client.get(url.split(base_of(url), 1)[1])
            page = client.get(f"/runs/{run_ids['weak']}").text
    finally:
        stop(proc)
    shown = f"{hat['weak']['corrected']:.3f} [{hat['weak']['ci_low']:.3f}, {hat['weak']['ci_high']:.3f}]"
    assert 'id="simulator-pass-hat-k"' in page and shown in page


PHONE_DOMAIN = '''
class LineDesk:
    """The agent's tools: the carrier's records."""

    def __init__(self):
        self.checked = []

    def check_line(self, phone: str) -> str:
        """Check a customer's line."""
        self.checked.append(phone)
        return "line active"

    def state(self):
        return {"checked": self.checked}


class Phone:
    """The user's own device (dual control): only the user can act on it."""

    def __init__(self):
        self.airplane_mode = True

    def set_state(self, initial_state):
        self.airplane_mode = initial_state["initialization_data"]["user_data"]["airplane_mode"]

    def toggle_airplane_mode(self) -> str:
        """Turn airplane mode on or off."""
        self.airplane_mode = not self.airplane_mode
        return f"airplane mode {'on' if self.airplane_mode else 'off'}"

    def assert_data_works(self) -> bool:
        return not self.airplane_mode

    def state(self):
        return {"airplane_mode": self.airplane_mode}
'''


def _phone_registry(tmp_path: Path, toggles: bool) -> Path:
    ask = ("My mobile data does not work. Call check_line with {\"phone\": \"555\"}. Then reply with exactly"
           " Your line is active; please turn airplane mode off.")
    done = {"tool": "toggle_airplane_mode", "arguments": {},
            "say": "Done, it is off. Reply with exactly Great, your data works now."}
    task = {"id": "data_1", "user_scenario": {"instructions": {
                "domain": "telecom", "reason_for_call": "Mobile data does not work.", "known_info": "555",
                "unknown_info": "", "task_instructions": "Follow the agent's advice on your phone."}},
            "initial_state": {"initialization_data": {"user_data": {"airplane_mode": True}}},
            "evaluation_criteria": {
                "actions": [{"action_id": "a0", "name": "check_line", "arguments": {"phone": "555"}},
                            {"action_id": "a1", "name": "toggle_airplane_mode", "arguments": {},
                             "requestor": "user"}],
                "env_assertions": [{"env_type": "user", "func_name": "assert_data_works", "arguments": {},
                                    "assert_value": True}],
                "reward_basis": ["DB", "ENV_ASSERTION", "ACTION"]},
            "mock_script": {"turns": [ask, done if toggles else "I would rather not touch my phone."]}}
    spec = {**smoke_eval("phone.data", "data/phone/tasks.json"), "matcher": {"kind": "tau2"},
            "tool_class": "phone_domain:LineDesk", "user": {"tool_class": "phone_domain:Phone"}}
    registry = write_registry(tmp_path / "reg", evals={"phone/data.json": spec},
                              data={"data/phone/tasks.json": json.dumps([task]),
                                    "phone_domain.py": PHONE_DOMAIN})
    return registry


@pytest.mark.parametrize("toggles", [True, False])
def test_a_user_acts_on_its_own_device_and_the_agent_never_sees_it(tmp_path: Path, toggles: bool) -> None:
    """Issue 63, item 1: τ²-bench's dual control. The user's tool class is the user's alone; its
    calls run through a toolbox of its own, are stored as the user's, and τ²'s scoring compares
    the user's device with the gold replay of the user's expected actions."""
    result = _talk(tmp_path, registry=_phone_registry(tmp_path, toggles), eval_id="phone.data")
    assert [s["passed"] for s in result.stats] == [1 if toggles else 0]
    store = tmp_path / "s.db"
    calls = query_rows(store, "select side, name from tool_calls order by rowid")
    assert calls == [{"side": "agent", "name": "check_line"}] + (
        [{"side": "user", "name": "toggle_airplane_mode"}] if toggles else [])
    (row,) = _trajectories(store, "details", transcript="transcript", device="user.state")
    assert "toggle_airplane_mode" not in row["transcript"]  # the agent never saw the user's tool
    assert json.loads(row["device"]) == {"airplane_mode": not toggles}
    details = json.loads(row["details"])
    assert details["db"]["user"]["match"] is toggles and details["db"]["match"] is toggles
    assert details["env_assertions"] == [{"func_name": "assert_data_works", "met": toggles}]
    assert [a["matched"] for a in details["actions"]] == [True, toggles]


def test_a_user_whose_service_fails_makes_the_cell_an_infrastructure_error(tmp_path: Path) -> None:
    """The simulated user's failed request is the cell's infrastructure error, as the agent's would
    be: neither passed nor failed, sent again by the next run."""
    registry = _scripted(tmp_path, ["Reply with exactly done."], user={"service": "flaky_user"})
    services = [{"name": "flaky_user", "base_url": "http://127.0.0.1:9/v1", "default_model": "m",
                 "timeout_ms": 5000, "mock": {"enabled": True, "fail_rate": 1.0}}]
    (registry / "services.json").write_text(json.dumps(services))
    result = _talk(tmp_path, registry=registry, eval_id="talk.e")
    assert result.stats[0]["errors"] == 1 and result.stats[0]["passed"] == 0
    (row,) = _trajectories(tmp_path / "s.db", "error_kind, status_code", stop="stop_reason")
    assert row["error_kind"] is not None and row["status_code"] == 500 and row["stop"] is None
