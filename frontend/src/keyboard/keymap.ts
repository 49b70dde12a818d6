// The keyboard map: Google Reader's keys by default, remappable. Pure: a
// `KeyMatcher` turns key presses into actions (two-key sequences like
// `g u` included) and knows nothing of the DOM beyond the event's fields.

export type Action =
  | 'next'
  | 'prev'
  | 'nextNoOpen'
  | 'prevNoOpen'
  | 'toggleRead'
  | 'toggleStar'
  | 'bookmark'
  | 'openArticle'
  | 'openOriginal'
  | 'markAllRead'
  | 'markAboveRead'
  | 'markBelowRead'
  | 'refresh'
  | 'goUnread'
  | 'goAll'
  | 'goStarred'
  | 'search'
  | 'palette'
  | 'help'
  | 'close';

export interface Binding {
  action: Action;
  label: string;
  /** Space-separated presses; a press is a `KeyboardEvent.key`, with `mod+` for ⌘/Ctrl. */
  keys: string;
}

export const DEFAULT_BINDINGS: readonly Binding[] = [
  { action: 'next', label: 'Next article (open it)', keys: 'j' },
  { action: 'prev', label: 'Previous article (open it)', keys: 'k' },
  { action: 'nextNoOpen', label: 'Move down the list', keys: 'n' },
  { action: 'prevNoOpen', label: 'Move up the list', keys: 'p' },
  { action: 'openArticle', label: 'Open the selected article', keys: 'o' },
  { action: 'openOriginal', label: 'Open the original page', keys: 'v' },
  { action: 'toggleRead', label: 'Mark read / unread', keys: 'm' },
  { action: 'toggleStar', label: 'Star / unstar', keys: 's' },
  { action: 'bookmark', label: 'Bookmark (save a snapshot)', keys: 'b' },
  { action: 'markAllRead', label: 'Mark all read', keys: 'A' },
  { action: 'markAboveRead', label: 'Mark everything above read', keys: 'mod+ArrowUp' },
  { action: 'markBelowRead', label: 'Mark everything below read', keys: 'mod+ArrowDown' },
  { action: 'refresh', label: 'Refresh', keys: 'r' },
  { action: 'goUnread', label: 'Go to unread', keys: 'g u' },
  { action: 'goAll', label: 'Go to all items', keys: 'g a' },
  { action: 'goStarred', label: 'Go to starred', keys: 'g s' },
  { action: 'search', label: 'Search', keys: '/' },
  { action: 'palette', label: 'Command palette', keys: 'mod+k' },
  { action: 'help', label: 'Keyboard help', keys: '?' },
  { action: 'close', label: 'Close / back', keys: 'Escape' },
];

/** The bindings in force: the defaults with the user's remaps applied. */
export function bindings(overrides: Record<string, string> = {}): Binding[] {
  return DEFAULT_BINDINGS.map((binding) => {
    const keys = overrides[binding.action];
    return keys && keys.trim() ? { ...binding, keys: normalizeKeys(keys) } : { ...binding };
  });
}

/** Collapses whitespace; `Ctrl+K`, `cmd+k`, `Meta+k` all become `mod+k`. */
export function normalizeKeys(keys: string): string {
  return keys
    .trim()
    .split(/\s+/)
    .map((press) => press.replace(/^(ctrl|cmd|meta|mod|control)\+/i, 'mod+'))
    .map((press) => (press.startsWith('mod+') && press.length === 5 ? press.toLowerCase() : press))
    .join(' ');
}

/** Two actions bound to the same keys, or one binding a prefix of another. */
export function conflicts(list: readonly Binding[]): [Action, Action][] {
  const found: [Action, Action][] = [];
  for (let a = 0; a < list.length; a += 1) {
    for (let b = a + 1; b < list.length; b += 1) {
      const x = list[a].keys;
      const y = list[b].keys;
      if (x === y || y.startsWith(`${x} `) || x.startsWith(`${y} `)) found.push([list[a].action, list[b].action]);
    }
  }
  return found;
}

export interface KeyPress {
  key: string;
  ctrlKey?: boolean;
  metaKey?: boolean;
  altKey?: boolean;
}

/** The press as a binding names it: `j`, `A`, `mod+k`. */
export function pressName(event: KeyPress): string | null {
  if (event.altKey) return null;
  if (['Shift', 'Control', 'Meta', 'Alt', 'CapsLock'].includes(event.key)) return null;
  if (event.ctrlKey || event.metaKey) {
    return `mod+${event.key.length === 1 ? event.key.toLowerCase() : event.key}`;
  }
  return event.key;
}

/** Elements whose keys belong to the user's typing. */
export function isTypingTarget(target: EventTarget | null): boolean {
  if (!target || typeof (target as Element).closest !== 'function') return false;
  const element = target as HTMLElement;
  if (element.isContentEditable) return true;
  return element.closest('input, textarea, select, [contenteditable=""], [contenteditable="true"]') !== null;
}

/** Follows presses, with a pending first key of a sequence. */
export class KeyMatcher {
  private pending: string | null = null;

  constructor(private list: readonly Binding[]) {}

  setBindings(list: readonly Binding[]): void {
    this.list = list;
    this.pending = null;
  }

  /** The action the press completes; `pending` when it starts a sequence; null when nothing. */
  press(event: KeyPress): Action | 'pending' | null {
    const name = pressName(event);
    if (name === null) return null;
    if (this.pending !== null) {
      const sequence = `${this.pending} ${name}`;
      this.pending = null;
      const match = this.list.find((binding) => binding.keys === sequence);
      if (match) return match.action;
      // Not a sequence: the press counts on its own.
    }
    const exact = this.list.find((binding) => binding.keys === name);
    if (exact) return exact.action;
    if (this.list.some((binding) => binding.keys.startsWith(`${name} `))) {
      this.pending = name;
      return 'pending';
    }
    return null;
  }

  reset(): void {
    this.pending = null;
  }
}
