// Hands the events of the one tenant-wide stream to the views that want one session's events, so a
// page holds a single event connection however many sessions it opens.
import { EventStream, sessionOf } from "./events";
import type { ServerEvent } from "./types";

export type Listener = (event: ServerEvent) => void;

export class EventHub {
  private listeners = new Map<string, Set<Listener>>();
  stream: EventStream | null = null;

  /** `listener` hears the session's events, and every `stream.reset`; returns the unsubscribe. */
  listen(sessionID: string, listener: Listener): () => void {
    const set = this.listeners.get(sessionID) ?? new Set<Listener>();
    set.add(listener);
    this.listeners.set(sessionID, set);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(sessionID);
    };
  }

  dispatch(event: ServerEvent): void {
    if (event.type === "stream.reset") {
      for (const set of this.listeners.values()) for (const listener of set) listener(event);
      return;
    }
    const id = sessionOf(event);
    if (id === null) return;
    for (const listener of this.listeners.get(id) ?? []) listener(event);
  }

  /** See EventStream.resync. */
  resync(): void {
    this.stream?.resync();
  }
}
