"""What telemetry costs per turn, in-process: prints JSON.

    python bench/telemetry.py [--format text|json] [--turns 300] [--repeats 15]

`turn_us`: CPU time (this thread) of the telemetry of one plain turn as the server does it: the
request's span (context from the request headers) and request id, the turn's span, three store
batches, a model call (first token, usage, finish) and the four log lines (turn started, model call
finished, turn finished, the access log line) rendered into memory; no exporter, as `agentforge
serve` runs without OTLP. The minimum and median over `--repeats` rounds of `--turns` turns: on a
shared machine the minimum is the steadier figure.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import statistics
import time

from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agentforge.session.observer import CalledModel
from agentforge.telemetry.context import bound
from agentforge.telemetry.logs import LogFormat, configure_logging
from agentforge.telemetry.observer import Telemetry

SESSION = "ses_dcd175100fff7aXtTCVuElApIw"
MESSAGE = "msg_232e8b356000uT917gj8QufjTv"
HEADERS = {"host": "127.0.0.1:4096", "content-type": "application/json", "content-length": "80"}


def one_turn(telemetry: Telemetry, model: CalledModel) -> None:
    access = logging.getLogger("uvicorn.access")
    context = TraceContextTextMapPropagator().extract(HEADERS)
    with (
        bound(request_id="8bc90d9b6b62496cb61ecd82cb00d72d"),
        telemetry.tracer.start_as_current_span("POST", context=context) as span,
    ):
        with telemetry.turn("default", SESSION) as turn:
            for _ in range(3):
                telemetry.batch(3, 1, 2, True, telemetry.capture())
            with telemetry.model_call("default", SESSION, MESSAGE, model) as call:
                call.first_token()
                call.usage(10, 5, 0.0, "stop")
                call.finish(None)
            turn.finish("completed")
        access.info(
            '%s - "%s %s HTTP/%s" %d', "127.0.0.1:55528", "POST", f"/session/{SESSION}/message", "1.1", 200
        )
        span.update_name("POST /session/{session_id}/message")
        span.set_attribute("http.response.status_code", 200)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    log_format: LogFormat = "json" if args.format == "json" else "text"
    sink = io.StringIO()
    handler = configure_logging(log_format, "info", stream=sink)
    telemetry = Telemetry()
    model = CalledModel(provider_id="fake", model_id="test-model", api="openai")
    try:
        for _ in range(args.turns):
            one_turn(telemetry, model)
        rounds: list[float] = []
        for _ in range(args.repeats):
            sink.seek(0)
            sink.truncate()
            started = time.thread_time()
            for _ in range(args.turns):
                one_turn(telemetry, model)
            rounds.append((time.thread_time() - started) / args.turns * 1e6)
    finally:
        logging.getLogger().removeHandler(handler)
    print(
        json.dumps(
            {"turn_us_min": round(min(rounds), 1), "turn_us_median": round(statistics.median(rounds), 1)}
        )
    )


if __name__ == "__main__":
    main()
