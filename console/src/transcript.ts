// A session's transcript as the events describe it. `message.part.updated` carries the whole part
// (the server's stored state, or its in-flight snapshot on reconnect): it replaces. Deltas append.
// A part read from the store while it streams holds its last checkpoint, which no delta continues
// exactly: it takes no delta until the stream replaces it (EventStream.resync asks for that).
import type { Message, MessageInfo, Part, ServerEvent } from "./types";

export class Transcript {
  private order: string[] = [];
  private infos = new Map<string, MessageInfo>();
  private parts = new Map<string, Part[]>();
  // The Message objects handed out, rebuilt only when that message changed, so views can skip
  // re-rendering the others (a streaming delta touches one message out of thousands).
  private built = new Map<string, Message>();
  // Parts loaded mid-stream, waiting for the stream's `message.part.updated` (their snapshot).
  private unsynced = new Set<string>();
  version = 0;

  constructor(messages: Message[] = []) {
    for (const message of messages) this.load(message);
  }

  /** True while a part loaded mid-stream waits for its snapshot from the stream. */
  get waitingForSnapshot(): boolean {
    return this.unsynced.size > 0;
  }

  /** Older messages loaded later (paging back): merged in id order, newer state kept. */
  addOlder(messages: Message[]): void {
    for (const message of messages) if (!this.infos.has(message.info.id)) this.load(message);
    this.version++;
  }

  private load(message: Message): void {
    this.upsertInfo(message.info);
    this.parts.set(message.info.id, [...message.parts]);
    if (message.info.role !== "assistant" || message.info.time.completed) return;
    for (const part of message.parts) if (streaming(part)) this.unsynced.add(part.id);
  }

  messages(): Message[] {
    return this.order.map((id) => {
      const info = this.infos.get(id)!;
      const parts = this.parts.get(id) ?? [];
      const cached = this.built.get(id);
      if (cached && cached.info === info && cached.parts === parts) return cached;
      const message = { info, parts };
      this.built.set(id, message);
      return message;
    });
  }

  /** Applies one event of this session; true when the transcript changed. */
  apply(event: ServerEvent): boolean {
    const p = event.properties;
    switch (event.type) {
      case "message.updated":
        this.upsertInfo(p.info as MessageInfo);
        break;
      case "message.removed":
        this.removeMessage(p.messageID);
        break;
      case "message.part.updated":
        this.upsertPart(p.part as Part);
        break;
      case "message.part.removed":
        this.removePart(p.messageID, p.partID);
        break;
      case "message.part.delta":
        if (!this.appendDelta(p.messageID, p.partID, p.field, p.delta)) return false;
        break;
      default:
        return false;
    }
    this.version++;
    return true;
  }

  private upsertInfo(info: MessageInfo): void {
    if (!this.infos.has(info.id)) {
      // ids ascend with time: keep the order by id even if events arrive out of order
      let at = this.order.length;
      while (at > 0 && this.order[at - 1] > info.id) at--;
      this.order.splice(at, 0, info.id);
      this.parts.set(info.id, this.parts.get(info.id) ?? []);
    }
    this.infos.set(info.id, info);
  }

  private removeMessage(id: string): void {
    this.order = this.order.filter((m) => m !== id);
    this.infos.delete(id);
    for (const part of this.parts.get(id) ?? []) this.unsynced.delete(part.id);
    this.parts.delete(id);
    this.built.delete(id);
  }

  private upsertPart(part: Part): void {
    this.unsynced.delete(part.id);
    const list = [...(this.parts.get(part.messageID) ?? [])];
    const index = list.findIndex((x) => x.id === part.id);
    if (index >= 0) list[index] = part;
    else {
      let at = list.length;
      while (at > 0 && list[at - 1].id > part.id) at--;
      list.splice(at, 0, part);
    }
    this.parts.set(part.messageID, list);
  }

  private removePart(messageID: string, partID: string): void {
    const list = this.parts.get(messageID);
    if (list) this.parts.set(messageID, list.filter((x) => x.id !== partID));
    this.unsynced.delete(partID);
  }

  private appendDelta(messageID: string, partID: string, field: string, delta: string): boolean {
    const list = this.parts.get(messageID);
    const index = list?.findIndex((x) => x.id === partID) ?? -1;
    if (!list || index < 0) return false; // a delta never comes before its part's first update
    if (this.unsynced.has(partID)) return false; // it would continue a checkpoint, not the text
    const part = list[index] as unknown as Record<string, unknown>;
    const copy = [...list];
    copy[index] = { ...part, [field]: String(part[field] ?? "") + delta } as unknown as Part;
    this.parts.set(messageID, copy);
    return true;
  }
}

function streaming(part: Part): boolean {
  return (part.type === "text" || part.type === "reasoning") && !part.time?.end;
}
