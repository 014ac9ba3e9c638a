// The live event stream over fetch (EventSource cannot send an Authorization header). A session's
// stream resumes after a drop with Last-Event-ID: the last durable seq seen, so the server replays
// exactly what was missed. Durable events at or below that seq are dropped (never applied twice).
import { authHeaders } from "./auth";
import type { ServerEvent } from "./types";

export interface StreamHandlers {
  onEvent: (event: ServerEvent) => void;
  onState?: (state: "connecting" | "live" | "offline") => void;
  onUnauthorized?: () => void;
}

const MAX_BACKOFF_MS = 5000;

export class EventStream {
  private lastSeq: number | null = null;
  private controller: AbortController | null = null;
  private closed = false;

  constructor(
    private readonly sessionID: string | null,
    private readonly handlers: StreamHandlers,
  ) {}

  start(): void {
    void this.run();
  }

  close(): void {
    this.closed = true;
    this.controller?.abort();
  }

  private async run(): Promise<void> {
    let backoff = 250;
    while (!this.closed) {
      this.handlers.onState?.("connecting");
      try {
        await this.connectOnce(() => {
          backoff = 250;
          this.handlers.onState?.("live");
        });
      } catch {
        // network drop or server restart: retry below
      }
      if (this.closed) return;
      this.handlers.onState?.("offline");
      await new Promise((resolve) => setTimeout(resolve, backoff));
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
  }

  private async connectOnce(onOpen: () => void): Promise<void> {
    this.controller = new AbortController();
    const headers: Record<string, string> = { Accept: "text/event-stream", ...authHeaders() };
    // Seq is per session: only a session's stream can resume.
    if (this.sessionID && this.lastSeq !== null) headers["Last-Event-ID"] = String(this.lastSeq);
    const url = this.sessionID ? `/event?sessionID=${encodeURIComponent(this.sessionID)}` : "/event";
    const response = await fetch(url, { headers, signal: this.controller.signal, cache: "no-store" });
    if (response.status === 401) {
      this.closed = true;
      this.handlers.onUnauthorized?.();
      return;
    }
    if (!response.ok || !response.body) throw new Error(`event stream: ${response.status}`);
    onOpen();
    const parser = new SseParser((event) => this.deliver(event));
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      parser.feed(value);
    }
  }

  private deliver(event: ServerEvent): void {
    if (event.type === "stream.unauthorized") {
      this.closed = true;
      this.handlers.onUnauthorized?.();
      return;
    }
    // Only a session's stream is resumed and de-duplicated: on the tenant-wide one, ids count per
    // session and say nothing about order across sessions (the console re-reads lists instead).
    if (this.sessionID && event.id !== null) {
      const seq = Number(event.id);
      if (Number.isFinite(seq)) {
        if (this.lastSeq !== null && seq <= this.lastSeq) return; // already applied
        this.lastSeq = seq;
      }
    }
    this.handlers.onEvent(event);
  }
}

/** Server-Sent Events framing: `id:` and `data:` lines, a blank line ends an event. */
export class SseParser {
  private buffer = "";
  private id: string | null = null;
  private data: string[] = [];

  constructor(private readonly emit: (event: ServerEvent) => void) {}

  feed(chunk: string): void {
    this.buffer += chunk;
    let newline: number;
    while ((newline = this.buffer.search(/\r?\n/)) >= 0) {
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + (this.buffer[newline] === "\r" ? 2 : 1));
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === "") {
      if (this.data.length) {
        try {
          const body = JSON.parse(this.data.join("\n"));
          this.emit({ id: this.id, type: body.type, properties: body.properties ?? {} });
        } catch {
          // a malformed frame is skipped, not fatal
        }
      }
      this.id = null;
      this.data = [];
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "data") this.data.push(value);
    else if (field === "id") this.id = value;
  }
}
