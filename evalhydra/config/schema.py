"""Structured configs: the typed shape of every Hydra config group.

Typing the top-level fields (``service: ServiceConfig`` …) makes Hydra check
every ``conf/<group>/*.yaml`` and every command-line override: a wrong type or
an unknown key fails before any call, naming the key. Only the top-level schema
is registered in the ConfigStore, so no schema shows up as a selectable option.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from evalhydra.config.defaults import DEFAULT_REPORT_FORMATS, DEFAULT_STORE_PATH

__all__ = [
    "BatchConfig",
    "Config",
    "EvalConfig",
    "MatcherConfig",
    "MockConfig",
    "PricingConfig",
    "RateLimitConfig",
    "RetryConfig",
    "RunConfig",
    "ServiceConfig",
    "StoreConfig",
    "ToolConfig",
]


@dataclass
class RetryConfig:
    """zig_eval ``retry`` block plus evalhydra's strategy switches."""

    max_attempts: int = 1  # attempts of one request, 1..10 (1: no retry)
    backoff_ms: int = 0  # 0..60000; linear: backoff_ms * attempt
    # HTTP statuses retried while attempts remain
    retry_on_status: list[int] = field(default_factory=lambda: [429, 500, 502, 503, 504])
    strategy: str = "linear"  # linear | exponential
    max_backoff_ms: int = 60000  # cap for exponential backoff
    retry_after_cap_ms: int = 60000  # cap for an honoured Retry-After header


@dataclass
class RateLimitConfig:
    """Per-service budgets (token buckets); None means unlimited."""

    rpm: int | None = None  # most requests a minute (None: unlimited)
    tpm: int | None = None  # most tokens a minute (None: unlimited)


@dataclass
class ReasoningConfig:
    """How a reasoning model's thinking is taken out of its answer before scoring."""

    parse: bool = True  # false: score the reply's content as it is, thinking and all
    tags: list[str] = field(default_factory=lambda: ["<think>", "</think>"])  # an inline block's tags


@dataclass
class PricingConfig:
    """USD per million tokens."""

    input_per_mtok: float = 0.0  # USD per million prompt tokens
    output_per_mtok: float = 0.0  # USD per million completion tokens
    cached_input_per_mtok: float | None = None  # USD per million cached prompt tokens (None: the input price)
    reasoning_per_mtok: float | None = None  # thinking tokens (part of the output); None: the output price
    batch_discount: float = 0.5  # a batch cell's price as a share of the online price


@dataclass
class MockBehaviour:
    """How the built-in mock answers (docs/mock.md); :class:`evalhydra.services.mock.MockSettings`
    checks these fields.

    Attributes:
        latency_ms: Delay before every chat answer.
        jitter_ms: Uniform +/- spread added to ``latency_ms`` (never below 0).
        fail_rate: Share of chat requests answered with ``fail_status``.
        fail_status: Status of failures (500, 429, 503 ...).
        retry_after_s: When set, failures carry ``Retry-After`` (seconds).
        retry_after_http_date: Send ``Retry-After`` as an HTTP-date instead.
        fail_first_n: The first N chat requests fail, then all succeed.
        hang_rate: Share of chat requests never answered.
        malformed_rate: Share answered 200 with a truncated JSON body.
        reset_rate: Share whose connection closes mid-body.
        oversized_rate: Share answered with a valid body larger than a client's response cap.
        fault: One of :data:`~evalhydra.services.mock.settings.FAULTS`, forced on every chat request, or None.
        seed: Seed of the fault and jitter random generator.
        model: Model reported when a request names none, and by ``/v1/models``.
        fixed_reply: When set, every completion's content is this text.
        reasoning: When set, every reply thinks first, its thought in this shape (one of
            :data:`~evalhydra.services.mock.streaming.REASONING_SHAPES`).
        stream_delta_chars: Most characters in one delta of a streamed reply.
        stream_delay_ms: Pause between the events of a streamed reply (after ``latency_ms``
            before the first).
        stream_split_bytes: When > 0, a streamed reply is sent in pieces of this many bytes,
            cutting events and UTF-8 sequences across reads; else one piece per event.
        rate_limit_rps: When > 0, chat requests spend a budget refilling at this rate; past
            it they are refused with 429 (:mod:`evalhydra.services.mock.limits`).
        rate_limit_burst: The budget's size (the most requests at once from full).
        rate_limit_retry_after_s: The ``Retry-After`` of a refusal (None: none sent).
        rate_limit_later_rps: When > 0, the rate once ``rate_limit_later_after_s`` have passed
            since the first chat request.
        rate_limit_later_after_s: See ``rate_limit_later_rps``.
        rate_limit_dialect: Which provider's headers the budget speaks (one of
            :data:`~evalhydra.services.mock.settings.DIALECTS`).
        batch_delay_s: A batch (``/v1/batches``) is processed this long after it is created.
        batch_fail_every: When > 0, every n-th line of a batch goes to its error file.
        tool_wire: When set, how tool calls go on the wire, as one real server or another sends
            them: some of :data:`~evalhydra.services.mock.streaming.TOOL_WIRES` and the serving
            faults of :data:`~evalhydra.services.mock.tool_faults.TOOL_FAULTS`, comma-separated.
        tool_wire_rate: The share of replies ``tool_wire`` shapes, drawn per request from a
            generator of its own (seeded): faults in a known share of cells.
        batch_outcome: When set, how every batch ends instead of ``completed``: one of
            :data:`~evalhydra.services.mock.batches.BATCH_OUTCOMES`.
        judge_sensitivity: As a ``model_grade`` judge, the chance it passes an output that matches
            the ideal (drawn from the seeded generator): a judge with known error rates.
        judge_specificity: As that judge, the chance it fails an output that does not match.
    """

    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    fail_rate: float = 0.0
    fail_status: int = 500
    retry_after_s: float | None = None
    hang_rate: float = 0.0
    malformed_rate: float = 0.0
    seed: int = 0
    retry_after_http_date: bool = False
    fail_first_n: int = 0
    reset_rate: float = 0.0
    oversized_rate: float = 0.0
    fault: str | None = None
    model: str = "mock-model"
    fixed_reply: str | None = None
    reasoning: str | None = None  # reasoning_content | reasoning | inline: the replies think first
    stream_delta_chars: int = 4
    stream_delay_ms: float = 0.0
    stream_split_bytes: int = 0
    rate_limit_rps: float = 0.0  # > 0: a request budget refilling at this rate (429 past it)
    rate_limit_burst: int = 20
    rate_limit_retry_after_s: float | None = 1.0
    rate_limit_later_rps: float = 0.0  # > 0: the rate after rate_limit_later_after_s
    rate_limit_later_after_s: float = 0.0
    rate_limit_dialect: str = "openai"  # openai | bucket | anthropic | azure | bare: the headers it sends
    batch_delay_s: float = 0.0  # a batch is processed this long after it is created
    batch_fail_every: int = 0  # > 0: every n-th line of a batch goes to its error file
    batch_outcome: str | None = None  # expired (half the lines done) | failed (validation) | stuck
    tool_wire: str | None = None  # how tool calls are sent: TOOL_WIRES and TOOL_FAULTS, comma-separated
    tool_wire_rate: float = 1.0  # the share of replies tool_wire shapes (drawn per request, seeded)
    judge_sensitivity: float = 1.0  # as a model_grade judge: the chance it passes an output that is right
    judge_specificity: float = 1.0  # ... and the chance it fails one that is wrong


@dataclass
class MockConfig(MockBehaviour):
    """Start the built-in mock server for this service (base_url is then ignored)."""

    enabled: bool = False  # answer with the built-in mock on loopback (base_url is then ignored)


@dataclass
class BatchConfig:
    """Send a chat service's cells as batch jobs (``/v1/files`` + ``/v1/batches``)."""

    enabled: bool = False  # send the cells as batch jobs (cheaper, slower)
    completion_window: str = "24h"  # the provider's completion window for each batch
    poll_interval_s: float = 30.0  # seconds between polls of a batch's status
    poll_timeout_s: float = 600.0  # polls failing this long end the run, the batch left for a rerun
    max_requests: int = 50000  # lines per batch file (the provider's limit); also the cells waiting at once
    max_bytes: int = 200_000_000  # bytes per batch file (the provider's limit)
    fallback: str = "batch"  # batch | online: how a rerun re-sends cells whose batch line failed
    resubmit_failed: bool = False  # re-send failed and expired lines once within the run
    keep_files: bool = False  # keep the input and output files at the provider after download


@dataclass
class ServiceConfig:
    """One service: an OpenAI-compatible endpoint, the mock, or an agent CLI."""

    name: str = MISSING  # the service's name, as results and reports show it
    kind: str = "openai"  # openai | command
    base_url: str = ""  # the API's root, e.g. http://127.0.0.1:8000/v1 (ignored by the mock)
    default_model: str = "mock-model"  # the model asked when service.model is not set
    model: str | None = None  # sweepable override of default_model
    # what is deployed behind the URL and model name (a commit, a date): another revision is other cells
    revision: str | None = None
    timeout_ms: int = 60000  # each request's timeout
    deadline_ms: int | None = None  # bound on all attempts of one cell
    # the environment variable holding the key (read at call time, never stored)
    api_key_env: str | None = None
    # the provider's name, for pricing and rate-limit headers (openai, anthropic, …)
    provider: str | None = None
    system_prompt: str | None = None  # a system message sent before every case
    retry: RetryConfig = field(default_factory=RetryConfig)  # HTTP retries of one request
    max_concurrency: int = 64  # most requests in flight to this service
    transport: str = "lean"  # lean (httptools on trio) | httpx (httpcore); a proxied service uses httpx
    proxy: str | None = None  # an HTTP(S) proxy URL for this service (else HTTPS_PROXY & co. apply)
    verify: bool = True  # false: accept any TLS certificate (a self-signed test endpoint)
    ca_bundle: str | None = None  # a PEM file (or a directory of them) of CAs to trust instead
    # extra HTTP headers (${oc.env:VAR} values are read at call time)
    headers: dict[str, str] = field(default_factory=dict)
    # generation parameters sent with every request (temperature, max_tokens, …)
    params: dict[str, Any] = field(default_factory=dict)
    rate_limit: RateLimitConfig = field(default_factory=RateLimitConfig)  # request and token budgets
    pricing: PricingConfig = field(default_factory=PricingConfig)  # prices, for each cell's cost
    # how a reasoning model's thinking is taken out of its answer
    reasoning: ReasoningConfig = field(default_factory=ReasoningConfig)
    stream: bool = False  # send stream: true and read server-sent events (time to first token is stored)
    record_wire: bool = False  # keep each reply's tool calls as sent (for compare --attribute-server)
    api: str = "chat"  # chat (…/chat/completions) | responses (…/v1/responses: OpenAI's Responses API)
    adaptive: bool = True  # adapt the requests in flight to the endpoint's limits (429s, x-ratelimit-*)
    rate_limit_timeout_s: float = 600.0  # adaptive: a cell refused (429) this long ends rate_limited
    batch: BatchConfig = field(default_factory=BatchConfig)  # batch jobs (/v1/files + /v1/batches)
    # the built-in mock and how it answers (docs/mock.md)
    mock: MockConfig = field(default_factory=MockConfig)
    # kind: command (agent CLIs, issue 6)
    cli_name: str | None = None  # kind command: the agent CLI's name in reports
    env_prefix: str = "ZRB"  # kind command: the prefix of the variables the CLI reads (zrb's ZRB)
    timeout_s: float = 300.0  # kind command: one trial's timeout
    honor_verification_marker: bool = True  # zrb 0.1.13 honours VERIFICATION_RESULT: lines; false opts out
    template: str | None = None  # zrb | claude-code | opencode
    argv: list[str] | None = None  # kind command: the command line, with {placeholders} filled per trial
    models: list[str] = field(default_factory=list)  # several models in one run and one pool (zrb's --models)


@dataclass
class ToolConfig:
    """A tool offered to the model (zig_eval ``tools`` entry); with ``implementation`` or
    ``replies`` it runs, and the cell is a tool loop (``docs/tool-agents.md``)."""

    name: str = MISSING  # the tool's name, as the model calls it
    description: str = ""  # what the tool does, as the model reads it
    parameters_json: str = "{}"  # its JSON schema of arguments, as a JSON string
    implementation: str | None = None  # "pkg.module:function" (sync or async), from the registry root
    replies: Any = None  # canned: {"<arguments as JSON>": reply, "*": reply}, or one reply for any call
    parallel: bool = False  # may run at the same time as the turn's other parallel calls
    timeout_s: float = 30.0  # how long one call may run


@dataclass
class MatcherConfig:
    """Every matcher's options in one typed node; ``kind`` picks the matcher.

    Keys that do not belong to ``kind`` are rejected when the eval loads.
    """

    # which matcher: exact_match, includes, regex, json_fields, tool_call, model_grade, …
    kind: str = "exact_match"
    case_sensitive: bool | None = None  # exact_match, includes: compare case-sensitively (default true)
    trim_whitespace: bool | None = None  # exact_match, includes: trim both sides first (default true)
    required_fields: list[str] | None = None  # json_fields: root keys the JSON answer must have
    pattern: str | None = None  # regex: the pattern the answer must match
    flags: list[str] | None = None  # regex: flags such as IGNORECASE or i
    ideal: str | None = None  # the expected answer, over the case's own
    schema: Any = None  # json_schema: inline object or registry-relative path
    strip_fence: bool | None = None  # json_fields, json_schema: read JSON out of a ```json fence
    judge_service: str | None = None  # model_grade, rubric: the judge's service
    judge_model: str | None = None  # model_grade, rubric: the judge's model (default: its service's)
    include_reasoning: bool | None = None  # model_grade, rubric: show the judge the candidate's thinking
    include_transcript: bool | None = None  # model_grade, rubric: show the judge a tool loop's conversation
    rubric: str | None = None  # model_grade: what the judge grades against
    pass_score: float | None = None  # model_grade: the lowest passing score (0..1, default 1)
    prompt: str | None = None  # rubric: registry-relative evaluator prompt
    weights: dict[str, float] | None = None  # rubric: criterion -> weight
    pass_threshold: float | None = None  # rubric, tool_call_f1: the lowest passing score
    parts: list[Any] | None = None  # all_of | any_of | weighted
    threshold: float | None = None  # weighted
    _target_: str | None = None  # custom: dotted path of a callable or class
    validator: str | None = None  # custom: path of a zrb validator.py
    kwargs: dict[str, Any] | None = None  # custom: keyword arguments of the callable
    testing_criteria: list[Any] | None = None  # openai_graders: OpenAI Evals graders, as the API has them
    embedding_model: str | None = None  # openai_graders: cosine's embedding model
    python_timeout_s: float | None = None  # openai_graders: how long a python grader may run
    output_json: bool | None = None  # openai_graders: fill sample.output_json (a structured-output run)
    name: str | None = None  # tool_used, tool_args: the tool
    min: int | None = None  # tool_used (default 1), step_count
    max: int | None = None  # tool_used, step_count: the most calls or steps
    args: Any = None  # tool_args: the arguments expected
    mode: str | None = None  # partial | exact (tool_args, state); in_order | exact | subset | superset
    ignore: list[str] | None = None  # tool_args: argument names left out
    steps: list[str] | None = None  # tool_sequence, tool_call_f1: tool names
    state: Any = None  # state: the tool class's expected end state
    tool_class: str | None = None  # tau2: the domain's tools (module:Class; default: the eval's)
    user_tool_class: str | None = None  # tau2: the user's own tools (default: the eval's user.tool_class)
    strict_arguments: bool | None = None  # tool_call: "" is invalid JSON, as zig_eval reads it


@dataclass
class EvalConfig:
    """One eval (zig_eval eval definition), or a suite of registry evals.

    A suite (``eval=GROUP`` for a group of several evals) lists member ids in
    ``include``; a ``matcher`` set on a suite overrides every member's matcher.
    """

    id: str = ""  # default: the config file's name (eval=NAME)
    group: str = ""  # the eval's group (default: its id up to the first dot)
    description: str = ""  # one line about the eval, shown by evalhydra list
    dataset_path: str | None = None  # relative to the file that names it, else to the registry root
    split: str = "test"  # the dataset's split (zig_eval's)
    matcher: MatcherConfig | None = None  # how each answer is scored
    default_run_count: int = 1  # trials per case unless trials= is given
    service_allowlist: list[str] | None = None  # services the eval may run on (None: any)
    # tools offered to the model; with implementation or replies they run (a tool loop)
    tools: list[ToolConfig] = field(default_factory=list)
    max_attempts: int = 1  # aiwg refinement loop
    include: list[str] = field(default_factory=list)  # a suite's member eval ids
    cases: Any = None  # agent evals: a directory or a list of case directories
    prompt: str | None = None  # a template filled from each case's fields: "Q: {{question}}"
    messages: Any = None  # a conversation template: [{role: user, content: "{{question}}"}]
    params: dict[str, Any] = field(default_factory=dict)  # temperature, max_tokens, …: over the service's
    tool_class: str | None = None  # "pkg.module:Class": one per cell; its public methods are tools
    loop: Any = None  # a tool loop's limits and choices (LoopPlan's fields): max_turns, max_tokens, …
    mcp: Any = None  # MCP servers whose tools the loop offers: [{name, command | url, env, tools, …}]
    user: Any = None  # a simulated user in the loop: {service, model, instructions, max_turns, …}


@dataclass
class JudgeConfig:
    """Every model-graded eval's judge: what it is shown, and its own settings (a judge service's
    file holds the rest)."""

    include_reasoning: bool = False  # the candidate's thinking too, not only its answer
    timeout_ms: int | None = None  # each judge service's request timeout (default: its file's)
    # a judge that is the built-in mock: the chance it passes a right output, and fails a wrong one
    mock_sensitivity: float | None = None
    mock_specificity: float | None = None  # the chance that mock judge fails a wrong output


@dataclass
class RunConfig:
    """How the run executes."""

    concurrency: int = 64  # most cells in flight at once (a trio.CapacityLimiter)
    # None: chat errors are re-sent (but a 4xx other than 408/409/429, which cannot succeed as it
    # is), agent ERROR/TIMEOUT kept (zrb); true: every error but those 4xx; "all": every error
    retry_errors: Any = None
    max_error_rate: float = 0.5  # exit 3 when a larger share of the run's cells are infrastructure errors
    fail_fast: bool = True  # stop when the first cells all fail to connect or time out (a dead endpoint)
    fail_under: float | None = None  # exit 1 when a target's pass rate is below this
    fail_under_per_eval: dict[str, float] = field(default_factory=dict)  # eval id or group -> threshold
    fail_under_pass_hat_k: float | None = None  # exit 1 when pass^k (all k trials of a case pass) is below
    pass_hat_k: int | None = None  # k of that gate; default: the fewest scored trials of a case
    require_judge_labels: int | None = None  # exit 1 when a target's judge has fewer labelled outputs
    min_judge_kappa: float | None = None  # exit 1 when a target's judge agrees less with the labels (κ)
    max_cost_usd: float | None = None  # stop scheduling new cells once this much is spent
    dry_run: bool = False  # print the plan and an estimate; make no call
    progress: bool = True  # show the progress bar (a plain line every 10 s when not a terminal)
    batch_size: int = 1000  # most results per store transaction
    agent_trials_dir: str | None = None  # where agent trials run; default: <store dir>/agent_trials
    shard_index: int = 0  # run only the cells of shard shard_index of shard_count (by cell key)
    shard_count: int = 1  # how many shards the run's cells are split into
    # which cases of each eval run (evalhydra.plan.selection): never part of a cell's identity
    limit: Any = None  # at most N cases per eval (20), or a share of them (0.1)
    cases: list[str] = field(default_factory=list)  # case ids or globs: run.cases=[q1,geo-*]
    tags: list[str] = field(default_factory=list)  # the dataset's tags: a case with any of them
    shuffle: bool = False  # send the cases in a random order (with limit: a random sample)
    seed: int = 0  # the shuffle's seed
    rerun: str | None = None  # failed: re-send the cases whose last verdict was FAIL or ERROR
    fresh: bool = False  # re-send every selected cell, stored or not (each a new version of its cell)


@dataclass
class CacheConfig:
    """The response cache (off by default): the same request to the same model is paid once."""

    enabled: bool = False  # answer repeated requests from the response cache
    path: str | None = None  # default: $XDG_CACHE_HOME/evalhydra/responses.db, shared by every store
    expiry: str = "7d"  # older entries are misses: seconds, or 30m, 12h, 7d, 2w
    judge: bool = True  # cache judge calls too


@dataclass
class TelemetryConfig:
    """OpenTelemetry out (off by default): every cell as GenAI spans, its verdicts as evaluation events."""

    export: str = "none"  # none | file (OTLP JSON lines in the run's folder) | otlp (telemetry.endpoint)
    endpoint: str | None = None  # an OTLP/HTTP traces URL (otlp); headers from OTEL_EXPORTER_OTLP_HEADERS
    capture_content: bool = False  # also messages, tool arguments and results, explanations (masked)
    propagate: bool = True  # send each cell's W3C traceparent with its requests (while telemetry is on)


@dataclass
class StoreConfig:
    """Where results go."""

    path: str = DEFAULT_STORE_PATH  # the SQLite store every result goes to


@dataclass
class Config:
    """The primary config."""

    service: ServiceConfig = MISSING  # the service the evals run against (service=NAME)
    eval: EvalConfig = MISSING  # the eval or suite to run (eval=NAME)
    matcher: MatcherConfig | None = None  # overrides every eval's matcher
    trials: int | None = None  # overrides each eval's default_run_count
    registry: str = "registry"  # the registry root ("registry": the packaged example when absent)
    judge_service: str | None = None  # overrides every model_grade and rubric judge's service
    judge: JudgeConfig = field(default_factory=JudgeConfig)  # every judge's settings
    baseline: str | None = None  # a sweep report's baseline, SERVICE[:MODEL]; default: the first value swept
    run: RunConfig = field(default_factory=RunConfig)  # how the run executes and what it gates on
    store: StoreConfig = field(default_factory=StoreConfig)  # where results go
    cache: CacheConfig = field(default_factory=CacheConfig)  # the response cache
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)  # OpenTelemetry spans out
    # report formats a run writes (json, md, jsonl, text, junit, html, openai)
    report: list[str] = field(default_factory=lambda: list(DEFAULT_REPORT_FORMATS))
