// The live event stream over fetch (EventSource cannot send an Authorization header). A session's
// stream resumes after a drop with Last-Event-ID: the last durable seq seen, so the server replays
// exactly what was missed. Durable events at or below that seq are dropped (never applied twice).
import { sdk } from "./api";
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
    // Seq is per session: only a session's stream can resume.
    const resume = this.sessionID && this.lastSeq !== null ? { "Last-Event-ID": String(this.lastSeq) } : undefined;
    let id: string | null = null;
    let failure: unknown = null;
    // One connection per call (sseMaxRetryAttempts: 1): reconnecting is this class's job, because
    // it must resume from the last seq applied, not from whatever id the SDK saw last.
    const { stream } = await sdk().event.subscribe({
      query: this.sessionID ? { sessionID: this.sessionID } : undefined,
      headers: resume,
      signal: this.controller.signal,
      sseMaxRetryAttempts: 1,
      onSseEvent: (event) => {
        id = event.id ?? null;
      },
      onSseError: (error) => {
        failure = error;
      },
    });
    let opened = false;
    for await (const data of stream as AsyncIterable<{ type: string; properties?: Record<string, any> }>) {
      if (!opened) {
        opened = true;
        onOpen();
      }
      this.deliver({ id, type: data.type, properties: data.properties ?? {} });
    }
    if (failure !== null) {
      if (/\b401\b/.test(String(failure))) {
        this.closed = true;
        this.handlers.onUnauthorized?.();
        return;
      }
      throw failure;
    }
  }

  private deliver(event: ServerEvent): void {
    if (event.type === "stream.reset") {
      // The server no longer holds the point asked for: the session view reloads from the store.
      this.lastSeq = null;
    }
    if (event.type === "stream.unauthorized") {
      this.closed = true;
      this.handlers.onUnauthorized?.();
      return;
    }
    // Only durable events carry an id of their own (the SDK repeats the last id on the others),
    // and only a session's stream is resumed: on the tenant-wide one, ids count per session.
    if (this.sessionID && event.id !== null && DURABLE.has(event.type)) {
      const seq = Number(event.id);
      if (Number.isFinite(seq)) {
        if (this.lastSeq !== null && seq <= this.lastSeq) return; // already applied
        this.lastSeq = seq;
      }
    }
    this.handlers.onEvent(event);
  }
}

// The events the server stores with a session seq (agentforge/model/events.py).
const DURABLE = new Set([
  "session.created",
  "session.updated",
  "session.deleted",
  "message.updated",
  "message.removed",
  "message.part.updated",
  "message.part.removed",
  "permission.asked",
  "permission.replied",
  "todo.updated",
]);

