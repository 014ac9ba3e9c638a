// A windowed list: only the rows near the viewport are in the DOM, so a session of thousands of
// messages opens as fast as one of ten. Row heights are measured as rows render (ResizeObserver)
// and estimated until then. The list follows the bottom while the reader is at the bottom.
import type { ComponentChildren } from "preact";
import { useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";

const ESTIMATE = 96;
const OVERSCAN_PX = 800;

interface Props<T> {
  items: T[];
  keyOf: (item: T) => string;
  render: (item: T) => ComponentChildren;
  label: string;
  version: number; // bumps when an item's content changes
  header?: ComponentChildren; // above the first item (e.g. "load earlier")
}

export function VirtualList<T>({ items, keyOf, render, label, version, header }: Props<T>) {
  const scroller = useRef<HTMLDivElement>(null);
  const heights = useRef(new Map<string, number>());
  const [measured, setMeasured] = useState(0);
  const [view, setView] = useState({ top: 0, height: 800 });
  const atBottom = useRef(true);

  const offsets = useMemo(() => {
    const result = new Array<number>(items.length + 1);
    result[0] = 0;
    for (let i = 0; i < items.length; i++) {
      result[i + 1] = result[i] + (heights.current.get(keyOf(items[i])) ?? ESTIMATE);
    }
    return result;
  }, [items, measured]);

  const total = offsets[items.length];
  const first = Math.max(0, upperBound(offsets, view.top - OVERSCAN_PX) - 1);
  const last = Math.min(items.length, upperBound(offsets, view.top + view.height + OVERSCAN_PX));

  const observer = useMemo(
    () =>
      new ResizeObserver((entries) => {
        let changed = false;
        for (const entry of entries) {
          const key = (entry.target as HTMLElement).dataset.key!;
          const height = Math.ceil(entry.borderBoxSize?.[0]?.blockSize ?? entry.contentRect.height);
          if (heights.current.get(key) !== height) {
            heights.current.set(key, height);
            changed = true;
          }
        }
        if (changed) setMeasured((n) => n + 1);
      }),
    [],
  );

  // Items added above (older pages): keep what the reader was looking at where it was.
  const firstKey = items.length ? keyOf(items[0]) : null;
  const previousFirst = useRef<string | null>(firstKey);
  useLayoutEffect(() => {
    const el = scroller.current!;
    const before = previousFirst.current;
    previousFirst.current = firstKey;
    if (atBottom.current) {
      el.scrollTop = el.scrollHeight;
      return;
    }
    const shifted = before !== null && before !== firstKey ? items.findIndex((item) => keyOf(item) === before) : -1;
    if (shifted > 0) el.scrollTop += offsets[shifted];
  }, [total, items.length, version]);

  useLayoutEffect(() => {
    const el = scroller.current!;
    const update = () => {
      atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
      setView({ top: el.scrollTop, height: el.clientHeight });
    };
    update();
    el.addEventListener("scroll", update, { passive: true });
    window.addEventListener("resize", update);
    return () => {
      el.removeEventListener("scroll", update);
      window.removeEventListener("resize", update);
      observer.disconnect();
    };
  }, []);

  const rows = items.slice(first, last).map((item) => {
    const key = keyOf(item);
    return (
      <div
        key={key}
        data-key={key}
        role="listitem"
        ref={(el) => {
          if (el) observer.observe(el);
        }}
      >
        {render(item)}
      </div>
    );
  });

  return (
    <div class="scroller" ref={scroller} tabIndex={0}>
      {header}
      <div role="list" aria-label={label} style={{ paddingTop: `${offsets[first]}px`, paddingBottom: `${total - offsets[last]}px` }}>
        {rows}
      </div>
    </div>
  );
}

/** The first index whose offset is greater than `value`. */
function upperBound(offsets: number[], value: number): number {
  let lo = 0;
  let hi = offsets.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (offsets[mid] <= value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
