"""The OpenTelemetry GenAI semantic conventions' names evalhydra emits.

Followed from ``open-telemetry/semantic-conventions-genai`` (Development stability, no release
yet): ``model/gen-ai/spans.yaml`` at commit ``7e7e4e763354b505b8e1f76512f17a1977b00f70`` and
``model/gen-ai/events.yaml`` at ``fecf9e12378d7b913438c954f8d7d243680ece47``. The names are
written here, not taken from a package's constants (those are marked "moved").
"""

from __future__ import annotations

__all__ = ["DEFINED", "EVALUATION_EVENT", "REQUIRED"]

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
AGENT_NAME = "gen_ai.agent.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"
#: An MCP tool call's method (``model/mcp``: an execute_tool span of an MCP call carries it).
MCP_METHOD = "mcp.method.name"

#: The event of a verdict, parented to the evaluated span.
EVALUATION_EVENT = "gen_ai.evaluation.result"
EVALUATION_NAME = "gen_ai.evaluation.name"
SCORE_VALUE = "gen_ai.evaluation.score.value"
SCORE_LABEL = "gen_ai.evaluation.score.label"
EXPLANATION = "gen_ai.evaluation.explanation"

#: What the spec requires of each span or event evalhydra emits (by operation, or the event's
#: name): the attributes whose requirement level is ``required``. A ``chat`` span names provider
#: ``openai``, whose refinement of the inference span (``openai.inference.client``) requires the
#: request model too.
REQUIRED = {
    "chat": (OPERATION, PROVIDER, REQUEST_MODEL),
    "invoke_agent": (OPERATION, PROVIDER),
    "execute_tool": (OPERATION, TOOL_NAME),
    EVALUATION_EVENT: (EVALUATION_NAME,),
}

#: Every attribute the spec defines for each span or event evalhydra emits (its ``attributes``
#: and the groups they reference; for ``chat``, the ``gen_ai.inference.client`` span and the
#: ``openai.inference.client`` refinement; for ``invoke_agent``, ``gen_ai.invoke_agent.client``).
#: Anything else evalhydra adds is named ``evalhydra.*``.
_COMMON = ("gen_ai.request.model", OPERATION, ERROR_TYPE, "server.address", "server.port", INPUT_TOKENS,
           OUTPUT_TOKENS, CACHE_READ_TOKENS, "gen_ai.usage.cache_creation.input_tokens",
           "gen_ai.system_instructions", INPUT_MESSAGES, OUTPUT_MESSAGES, "gen_ai.tool.definitions",
           "gen_ai.request.max_tokens", "gen_ai.request.choice.count", "gen_ai.request.temperature",
           "gen_ai.request.top_p", "gen_ai.request.stop_sequences", "gen_ai.request.frequency_penalty",
           "gen_ai.request.presence_penalty", "gen_ai.request.seed", "gen_ai.output.type", FINISH_REASONS,
           "gen_ai.conversation.id", PROVIDER)
DEFINED = {
    "chat": frozenset((*_COMMON, "gen_ai.request.top_k", "gen_ai.request.stream", RESPONSE_ID, RESPONSE_MODEL,
                       TIME_TO_FIRST_CHUNK, REASONING_TOKENS, "openai.request.service_tier",
                       "openai.response.service_tier", "openai.response.system_fingerprint",
                       "openai.api.type")),
    "invoke_agent": frozenset((*_COMMON, "gen_ai.agent.id", AGENT_NAME, "gen_ai.agent.description",
                               "gen_ai.agent.version", "gen_ai.data_source.id")),
    "execute_tool": frozenset((ERROR_TYPE, OPERATION, TOOL_NAME, TOOL_CALL_ID, "gen_ai.tool.description",
                               TOOL_TYPE, TOOL_ARGUMENTS, TOOL_RESULT, MCP_METHOD)),
    EVALUATION_EVENT: frozenset((EVALUATION_NAME, SCORE_VALUE, SCORE_LABEL, EXPLANATION, RESPONSE_ID,
                                 ERROR_TYPE)),
}
