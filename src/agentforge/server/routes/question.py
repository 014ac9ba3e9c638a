"""Question routes (KERNEL 1.2): list pending questions, answer or dismiss one."""

from __future__ import annotations

from fastapi import APIRouter

from agentforge.model.base import Wire
from agentforge.server.deps import RuntimeDep, TenantDep
from agentforge.server.responses import WireResponse
from agentforge.session.errors import NotFoundError

router = APIRouter(prefix="/question", tags=["question"])


class QuestionReplyInput(Wire):
    answers: list[list[str]]


def _unknown(request_id: str) -> NotFoundError:
    return NotFoundError(f"Question request not found: {request_id}")


@router.get("", operation_id="question.list", summary="Questions waiting for an answer")
async def pending_questions(rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    return WireResponse(await rt.questions.listed(tenant_id))


@router.post(
    "/{request_id}/reply",
    operation_id="question.reply",
    summary="Answer a question: one list of chosen labels per question",
)
async def reply(
    request_id: str, body: QuestionReplyInput, rt: RuntimeDep, tenant_id: TenantDep
) -> WireResponse:
    if not await rt.questions.answer(tenant_id, request_id, body.answers):
        raise _unknown(request_id)
    return WireResponse(True)


@router.post(
    "/{request_id}/reject", operation_id="question.reject", summary="Dismiss a question (the turn stops)"
)
async def reject(request_id: str, rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    if not await rt.questions.dismiss(tenant_id, request_id):
        raise _unknown(request_id)
    return WireResponse(True)
