// Settings: account password, the reader-app password for mobile apps,
// appearance (theme, typography), reading behaviour and the keyboard map.
import { useSignal } from '@preact/signals';
import { useEffect } from 'preact/hooks';
import { useRoute } from 'preact-iso';
import { mutate, query } from '../api/client';
import {
  ChangePasswordDocument,
  ClearReaderPasswordDocument,
  SaveReaderSettingsDocument,
  SetReaderPasswordDocument,
  SettingsPageDocument,
  type SettingsPageQuery,
} from '../gql/graphql';
import { DEFAULT_BINDINGS, bindings, conflicts, normalizeKeys } from '../keyboard/keymap';
import { defaultPrefs, prefs, setPrefs, type ArticleFont, type Theme } from '../state/prefs';
import { errorText, Failed, Loading } from '../ui/states';
import { Notice } from '../ui/notice';
import { keyLabel } from '../reader/Help';

const SECTIONS = [
  ['account', 'Account'],
  ['apps', 'Reader apps'],
  ['appearance', 'Appearance'],
  ['reading', 'Reading'],
  ['keyboard', 'Keyboard'],
] as const;


function formValue(event: Event, name: string): string {
  return String(new FormData(event.currentTarget as HTMLFormElement).get(name) ?? '');
}

function Account() {
  const state = useSignal<{ ok?: string; error?: string }>({});
  return (
    <section class="card" aria-labelledby="account-title">
      <h2 id="account-title">Password</h2>
      <Notice state={state.value} />
      <form
        onSubmit={async (event) => {
          event.preventDefault();
          const form = event.currentTarget as HTMLFormElement;
          const next = formValue(event, 'new');
          if (next !== formValue(event, 'repeat')) {
            state.value = { error: 'The new passwords differ.' };
            return;
          }
          try {
            await mutate(ChangePasswordDocument, { currentPassword: formValue(event, 'current'), newPassword: next });
            form.reset();
            state.value = { ok: 'Password changed. Your other sessions were signed out.' };
          } catch (error) {
            state.value = { error: errorText(error) };
          }
        }}
      >
        <div class="field">
          <label for="pw-current">Current password</label>
          <input id="pw-current" name="current" class="input" type="password" autocomplete="current-password" required />
        </div>
        <div class="field">
          <label for="pw-new">New password</label>
          <input id="pw-new" name="new" class="input" type="password" autocomplete="new-password" required minLength={8} />
        </div>
        <div class="field">
          <label for="pw-repeat">New password again</label>
          <input id="pw-repeat" name="repeat" class="input" type="password" autocomplete="new-password" required minLength={8} />
        </div>
        <button class="btn primary" type="submit">
          Change password
        </button>
      </form>
    </section>
  );
}

function Apps({ data, reload }: { data: SettingsPageQuery; reload: () => void }) {
  const state = useSignal<{ ok?: string; error?: string }>({});
  const origin = location.origin;
  return (
    <section class="card" aria-labelledby="apps-title">
      <h2 id="apps-title">Mobile reader apps</h2>
      <p>
        NetNewsWire, Reeder, Read You and other apps sign in with the Google Reader API at <code>{origin}</code> or the Fever API at{' '}
        <code>{origin}/fever/</code>, as <strong>{data.me?.username}</strong> with a password of their own.
      </p>
      <p>
        Status: <strong>{data.readerApiEnabled ? 'on' : 'off'}</strong>
      </p>
      <Notice state={state.value} />
      <form
        onSubmit={async (event) => {
          event.preventDefault();
          const form = event.currentTarget as HTMLFormElement;
          try {
            await mutate(SetReaderPasswordDocument, { currentPassword: formValue(event, 'current'), password: formValue(event, 'app') });
            form.reset();
            state.value = { ok: 'Reader apps can sign in with the new password.' };
            reload();
          } catch (error) {
            state.value = { error: errorText(error) };
          }
        }}
      >
        <div class="field">
          <label for="app-current">Your account password</label>
          <input id="app-current" name="current" class="input" type="password" autocomplete="current-password" required />
        </div>
        <div class="field">
          <label for="app-password">Password for reader apps</label>
          <input id="app-password" name="app" class="input" type="password" autocomplete="new-password" required minLength={8} />
          <span class="hint">It must differ from your account password.</span>
        </div>
        <div class="row">
          <button class="btn primary" type="submit">
            Set app password
          </button>
          {data.readerApiEnabled && (
            <button
              class="btn danger"
              type="button"
              onClick={async () => {
                try {
                  await mutate(ClearReaderPasswordDocument, {});
                  state.value = { ok: 'Reader apps are turned off.' };
                  reload();
                } catch (error) {
                  state.value = { error: errorText(error) };
                }
              }}
            >
              Turn reader apps off
            </button>
          )}
        </div>
      </form>
    </section>
  );
}

function Appearance() {
  const current = prefs.value;
  return (
    <section class="card" aria-labelledby="appearance-title">
      <h2 id="appearance-title">Appearance</h2>
      <fieldset class="field">
        <legend class="label">Theme</legend>
        <div class="row">
          {(['system', 'light', 'dark'] as Theme[]).map((theme) => (
            <label class="check" key={theme}>
              <input type="radio" name="theme" checked={current.theme === theme} onChange={() => setPrefs({ theme })} />
              {theme === 'system' ? 'Same as the system' : theme === 'light' ? 'Light' : 'Dark'}
            </label>
          ))}
        </div>
      </fieldset>
      <div class="field">
        <label for="font">Article font</label>
        <select id="font" class="input" value={current.font} onChange={(event) => setPrefs({ font: (event.target as HTMLSelectElement).value as ArticleFont })}>
          <option value="sans">Sans-serif</option>
          <option value="serif">Serif</option>
          <option value="mono">Monospace</option>
        </select>
      </div>
      <div class="field">
        <label for="size">Text size: {current.size}px</label>
        <input id="size" type="range" min={13} max={24} step={1} value={current.size} onInput={(event) => setPrefs({ size: Number((event.target as HTMLInputElement).value) })} />
      </div>
      <div class="field">
        <label for="width">Line width: {current.width} characters</label>
        <input id="width" type="range" min={45} max={100} step={1} value={current.width} onInput={(event) => setPrefs({ width: Number((event.target as HTMLInputElement).value) })} />
      </div>
      <div class="content preview" aria-label="Preview">
        <p>The quick brown fox jumps over the lazy dog. 敏捷的棕色狐狸跳过了懒狗。</p>
      </div>
    </section>
  );
}

function Reading({ data, reload }: { data: SettingsPageQuery; reload: () => void }) {
  const current = prefs.value;
  const state = useSignal<{ ok?: string; error?: string }>({});
  const save = async (input: Record<string, boolean | number | null>) => {
    try {
      await mutate(SaveReaderSettingsDocument, { input });
      reload();
      state.value = { ok: 'Saved.' };
    } catch (error) {
      state.value = { error: errorText(error) };
    }
  };
  return (
    <section class="card" aria-labelledby="reading-title">
      <h2 id="reading-title">Reading</h2>
      <Notice state={state.value} />
      <label class="check">
        <input type="checkbox" checked={current.markReadOnOpen} onChange={(event) => setPrefs({ markReadOnOpen: (event.target as HTMLInputElement).checked })} />
        Mark an article read when I open it
      </label>
      <label class="check">
        <input
          type="checkbox"
          checked={current.markReadOnScroll}
          onChange={(event) => {
            const checked = (event.target as HTMLInputElement).checked;
            setPrefs({ markReadOnScroll: checked });
            void save({ markReadOnScroll: checked });
          }}
        />
        Mark articles read as I scroll past them
      </label>
      <label class="check">
        <input type="checkbox" checked={data.settings.unreadOnly ?? true} onChange={(event) => void save({ unreadOnly: (event.target as HTMLInputElement).checked })} />
        Show unread articles only, at first
      </label>
      <div class="field">
        <label for="retention">Delete read articles after (days; empty keeps them)</label>
        <input
          id="retention"
          class="input"
          type="number"
          min={1}
          defaultValue={data.settings.retentionDays?.toString() ?? ''}
          onChange={(event) => {
            const raw = (event.target as HTMLInputElement).value;
            void save({ retentionDays: raw ? Number(raw) : null });
          }}
        />
        <span class="hint">Starred and bookmarked articles are never deleted.</span>
      </div>
    </section>
  );
}

function Keyboard() {
  const list = bindings(prefs.value.keys);
  const clashes = conflicts(list);
  const clashing = new Set(clashes.flat());
  return (
    <section class="card" aria-labelledby="keys-title">
      <h2 id="keys-title">Keyboard</h2>
      <p class="hint">Type a key (like <kbd>j</kbd>), a sequence (<kbd>g u</kbd>) or a chord (<kbd>ctrl+k</kbd>). Empty restores the default.</p>
      {clashes.length > 0 && (
        <p class="alert error" role="alert">
          Some keys clash: {clashes.map(([a, b]) => `${a} and ${b}`).join('; ')}.
        </p>
      )}
      <table class="grid">
        <thead>
          <tr>
            <th scope="col">Action</th>
            <th scope="col">Keys</th>
            <th scope="col">Default</th>
          </tr>
        </thead>
        <tbody>
          {list.map((binding) => {
            const fallback = DEFAULT_BINDINGS.find((entry) => entry.action === binding.action)!;
            return (
              <tr key={binding.action}>
                <td>
                  <label for={`key-${binding.action}`}>{binding.label}</label>
                </td>
                <td>
                  <input
                    id={`key-${binding.action}`}
                    class="input"
                    aria-invalid={clashing.has(binding.action)}
                    value={prefs.value.keys[binding.action] ?? ''}
                    placeholder={fallback.keys}
                    onChange={(event) => {
                      const value = normalizeKeys((event.target as HTMLInputElement).value);
                      const keys = { ...prefs.value.keys };
                      if (value) keys[binding.action] = value;
                      else delete keys[binding.action];
                      setPrefs({ keys });
                    }}
                  />
                </td>
                <td>
                  <kbd>{keyLabel(fallback.keys)}</kbd>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <p>
        <button type="button" class="btn" onClick={() => setPrefs({ keys: { ...defaultPrefs.keys } })}>
          Restore all defaults
        </button>
      </p>
    </section>
  );
}

export function Settings() {
  const { params, query: search } = useRoute();
  // Where the server's OAuth callbacks land (`?linked=anilist`, `?linked=oidc`).
  const linked = search.linked === 'anilist' ? 'AniList' : search.linked === 'oidc' ? 'Your identity provider' : null;
  const section = params.section ?? 'account';
  const data = useSignal<SettingsPageQuery | null>(null);
  const error = useSignal<unknown>(null);
  const load = () =>
    query(SettingsPageDocument, {})
      .then((result) => {
        data.value = result;
        error.value = null;
      })
      .catch((caught) => (error.value = caught));
  useEffect(() => void load(), []);

  return (
    <div class="page">
      <div class="page-inner">
        <h1>Settings</h1>
        <nav class="tabs settings-tabs" aria-label="Settings sections">
          {SECTIONS.map(([key, label]) => (
            <a key={key} href={`/settings/${key}`} aria-current={section === key ? 'page' : undefined}>
              {label}
            </a>
          ))}
        </nav>
        {linked && (
          <p class="alert ok" role="status">
            {linked} is linked to your account.{' '}
            {search.linked === 'anilist' && <a href="/gateway">Open the gateway page</a>}
          </p>
        )}
        {error.value ? (
          <Failed error={error.value} retry={load} />
        ) : !data.value ? (
          <Loading />
        ) : section === 'apps' ? (
          <Apps data={data.value} reload={load} />
        ) : section === 'appearance' ? (
          <Appearance />
        ) : section === 'reading' ? (
          <Reading data={data.value} reload={load} />
        ) : section === 'keyboard' ? (
          <Keyboard />
        ) : (
          <Account />
        )}
      </div>
    </div>
  );
}
