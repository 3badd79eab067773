"""The OpenTelemetry GenAI semantic conventions' names evalhydra emits.

Followed from ``open-telemetry/semantic-conventions-genai`` (Development stability, no release
yet): ``model/gen-ai/spans.yaml`` at commit ``7e7e4e763354b505b8e1f76512f17a1977b00f70`` and
``model/gen-ai/events.yaml`` at ``fecf9e12378d7b913438c954f8d7d243680ece47``. The names are
written here, not taken from a package's constants (those are marked "moved").
"""

from __future__ import annotations

__all__ = ["EVALUATION_EVENT", "REQUIRED"]

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
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
