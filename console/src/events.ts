// The tenant-wide event stream over fetch (EventSource cannot send an Authorization header). One
// connection per page feeds the session list, the pending requests and the open transcript. Its ids
// are the tenant's event positions: after a drop or a server restart it resumes with Last-Event-ID
// set to the last position applied, so the server replays exactly what was missed, then sends the
// parts still streaming with their text so far. Durable events at or below that position are
// dropped (never applied twice).
import { sdk } from "./api";
import type { ServerEvent } from "./types";

export interface StreamHandlers {
  onEvent: (event: ServerEvent) => void;
  onState?: (state: "connecting" | "live" | "offline") => void;
  onUnauthorized?: () => void;
}

const MAX_BACKOFF_MS = 5000;

export class EventStream {
  private lastPosition: number | null = null;
  private controller: AbortController | null = null;
  private closed = false;
  private resyncing = false;

  constructor(private readonly handlers: StreamHandlers) {}

  start(): void {
    void this.run();
  }

  close(): void {
    this.closed = true;
    this.controller?.abort();
  }

  /** Reconnects now, resuming from the last position: the server then sends a snapshot of every
   * part streaming right now (a view that loaded a part mid-stream needs one to continue it). */
  resync(): void {
    this.resyncing = true;
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
      if (this.resyncing) {
        this.resyncing = false; // asked for: reconnect at once
        continue;
      }
      this.handlers.onState?.("offline");
      await new Promise((resolve) => setTimeout(resolve, backoff));
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
  }

  private async connectOnce(onOpen: () => void): Promise<void> {
    this.controller = new AbortController();
    this.resyncing = false; // this connection sends the snapshots
    const resume = this.lastPosition !== null ? { "Last-Event-ID": String(this.lastPosition) } : undefined;
    let id: string | null = null;
    let previous: string | null = null;
    let failure: unknown = null;
    // One connection per call (sseMaxRetryAttempts: 1): reconnecting is this class's job, because
    // it must resume from the last position applied, not from whatever id the SDK saw last.
    const { stream } = await sdk().event.subscribe({
      headers: resume,
      signal: this.controller.signal,
      sseMaxRetryAttempts: 1,
      onSseEvent: (event) => {
        // The SDK repeats the last id on frames without one: a frame has an id of its own only
        // when it differs from the previous frame's (the server's ids strictly increase).
        const current = event.id ?? null;
        id = current !== previous ? current : null;
        previous = current;
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
    if (event.type === "stream.unauthorized") {
      this.closed = true;
      this.handlers.onUnauthorized?.();
      return;
    }
    const position = event.id !== null ? Number(event.id) : NaN;
    if (event.type === "stream.reset") {
      // The server no longer holds the point asked for: views reload from the store, and the
      // stream continues from the point the reset names.
      this.lastPosition = Number.isFinite(position) ? position : null;
    } else if (Number.isFinite(position)) {
      if (this.lastPosition !== null && position <= this.lastPosition) return; // already applied
      this.lastPosition = position;
    }
    this.handlers.onEvent(event);
  }
}

/** The session an event belongs to, wherever its shape keeps it (none: tenant-wide). */
export function sessionOf(event: ServerEvent): string | null {
  const p = event.properties;
  return p.sessionID ?? p.info?.sessionID ?? p.part?.sessionID ?? null;
}
