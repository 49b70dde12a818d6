// Preferences kept in this browser: theme, typography, mark-read behaviour
// and the keyboard map. (Server-side reader settings — unread only, oldest
// first, retention — live in `Settings` and are read by the reader.)
import { effect, signal } from '@preact/signals';

export type Theme = 'system' | 'light' | 'dark';
export type ArticleFont = 'sans' | 'serif' | 'mono';

export interface Prefs {
  theme: Theme;
  font: ArticleFont;
  /** Article text size in px. */
  size: number;
  /** Line width in characters. */
  width: number;
  markReadOnOpen: boolean;
  markReadOnScroll: boolean;
  /** Remapped keys: action → key (see keyboard/keymap.ts). */
  keys: Record<string, string>;
}

export const defaultPrefs: Prefs = {
  theme: 'system',
  font: 'sans',
  size: 17,
  width: 68,
  markReadOnOpen: true,
  markReadOnScroll: false,
  keys: {},
};

const STORAGE_KEY = 'trellis.prefs';

function load(): Prefs {
  try {
    const stored = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? '{}') as Partial<Prefs>;
    return { ...defaultPrefs, ...stored, keys: { ...stored.keys } };
  } catch {
    return { ...defaultPrefs };
  }
}

export const prefs = signal<Prefs>(load());

export function setPrefs(patch: Partial<Prefs>): void {
  prefs.value = { ...prefs.value, ...patch };
  try {
    localStorage.setItem(STORAGE_KEY, JSON.stringify(prefs.value));
  } catch {
    // Private mode or full storage: the choice holds for this visit.
  }
}

const systemDark = typeof matchMedia === 'function' ? matchMedia('(prefers-color-scheme: dark)') : null;
const systemTheme = signal<'light' | 'dark'>(systemDark?.matches ? 'dark' : 'light');
systemDark?.addEventListener('change', (event) => {
  systemTheme.value = event.matches ? 'dark' : 'light';
});

/** The theme in force: the user's, or the system's. */
export function effectiveTheme(): 'light' | 'dark' {
  const { theme } = prefs.value;
  return theme === 'system' ? systemTheme.value : theme;
}

const FONTS: Record<ArticleFont, string> = {
  sans: 'var(--font-ui)',
  serif: 'var(--font-serif)',
  mono: 'var(--font-mono)',
};

/** Keeps the document's theme and typography in step with the preferences. */
export function applyPrefs(root: HTMLElement = document.documentElement): () => void {
  return effect(() => {
    const current = prefs.value;
    root.dataset.theme = effectiveTheme();
    root.style.setProperty('--article-font', FONTS[current.font]);
    root.style.setProperty('--article-size', `${current.size}px`);
    root.style.setProperty('--article-width', `${current.width}ch`);
  });
}
