// The provider gateway (`/gateway`, `/gateway/providers/:id`): what each
// provider can do for the viewer (the capability manifest, with its
// limitations and cooldowns), linking Kavita (API key) and AniList (the
// OAuth round trip), "sync now", title links to confirm, events and
// receipts. Everything comes from the gateway's GraphQL; nothing here talks
// to a provider.
import { useSignal } from '@preact/signals';
import { useEffect } from 'preact/hooks';
import { useRoute } from 'preact-iso';
import { mutate, query } from '../api/client';
import {
  GatewayCheckDocument,
  GatewayLinkKavitaDocument,
  GatewayManifestDocument,
  GatewayScrobbleDocument,
  GatewayStartLinkDocument,
  GatewayUnlinkDocument,
  type GatewayCheckQuery,
  type GatewayManifestQuery,
} from '../gql/graphql';
import { watchTask } from '../tasks/watch';
import { errorText, Failed, Loading } from '../ui/states';
import { Events } from './Events';
import { Receipts } from './Receipts';
import { TitleLinks } from './TitleLinks';
import { FEATURE_LABEL, LINK_STATUS, PROVIDER_NAME, cooldownText, providerFromParam, syncSummary, type StatusLook } from './labels';
import { Notice, StatusPill, When, type NoticeState } from './parts';

type Manifest = GatewayManifestQuery['gatewayCapabilities'];
type ProviderCaps = Manifest['providers'][number];
type Check = GatewayCheckQuery['checkProvider'];

function KavitaLinkForm({ caps, onLinked }: { caps: ProviderCaps; onLinked: (account: string) => void }) {
  const state = useSignal<NoticeState>({});
  const busy = useSignal(false);
  const id = `link-${caps.provider.toLowerCase()}-key`;
  return (
    <form
      class="link-form"
      onSubmit={async (event) => {
        event.preventDefault();
        const form = event.currentTarget as HTMLFormElement;
        const apiKey = String(new FormData(form).get('apiKey') ?? '').trim();
        if (!apiKey) return;
        busy.value = true;
        state.value = {};
        try {
          const link = await mutate(GatewayLinkKavitaDocument, { apiKey });
          // The key is never kept on the page: the field is emptied, and the
          // server never returns it.
          form.reset();
          onLinked(link.linkKavita.accountName ?? 'your Kavita account');
        } catch (error) {
          state.value = { error: errorText(error) };
        } finally {
          busy.value = false;
        }
      }}
    >
      <Notice state={state.value} />
      <div class="field">
        <label for={id}>Kavita API key</label>
        <input
          id={id}
          name="apiKey"
          class="input"
          type="password"
          autocomplete="off"
          spellcheck={false}
          required
          disabled={!caps.linkConfigured}
          aria-describedby={`${id}-hint`}
        />
        <span class="hint" id={`${id}-hint`}>
          In Kavita: your user settings, API key. Checked with Kavita at once and stored encrypted; it is never shown again.
        </span>
      </div>
      <button class="btn primary" type="submit" disabled={busy.value || !caps.linkConfigured}>
        {busy.value ? 'Checking…' : caps.link ? 'Link Kavita again' : 'Link Kavita'}
      </button>
    </form>
  );
}

function OAuthLinkButton({ caps }: { caps: ProviderCaps }) {
  const state = useSignal<NoticeState>({});
  const busy = useSignal(false);
  const name = PROVIDER_NAME[caps.provider];
  return (
    <div class="link-form">
      <Notice state={state.value} />
      <p class="hint">You confirm on {name}’s own page, which sends you back here.</p>
      <button
        type="button"
        class="btn primary"
        disabled={busy.value || !caps.linkConfigured}
        onClick={async () => {
          busy.value = true;
          state.value = {};
          try {
            const start = await mutate(GatewayStartLinkDocument, { provider: caps.provider });
            // The provider's consent page: a plain navigation, as a link would do.
            location.assign(start.startProviderLink.authorizeUrl);
          } catch (error) {
            state.value = { error: errorText(error) };
            busy.value = false;
          }
        }}
      >
        {busy.value ? `Opening ${name}…` : caps.link ? `Link ${name} again` : `Link ${name}`}
      </button>
    </div>
  );
}

function CheckResult({ check }: { check: Check }) {
  return (
    <div class={`alert ${check.ok ? 'ok' : 'error'}`} role="status">
      <strong>{check.ok ? 'Everything answered as it should.' : 'Something did not answer as it should.'}</strong>
      <ul class="plain">
        {check.publicOk !== null && check.publicOk !== undefined && <li>Public catalog: {check.publicOk ? 'works' : 'fails'}</li>}
        {check.accountOk !== null && check.accountOk !== undefined && <li>Your account: {check.accountOk ? 'works' : 'refused'}</li>}
        {check.messages.map((message) => (
          <li key={message}>{message}</li>
        ))}
      </ul>
    </div>
  );
}

/** `refresh` reads the manifest again; `reload` also the lists below (a link changed). */
function ProviderCard({ caps, refresh, reload }: { caps: ProviderCaps; refresh: () => void; reload: () => void }) {
  const name = PROVIDER_NAME[caps.provider];
  const slug = caps.provider.toLowerCase();
  const check = useSignal<Check | null>(null);
  const state = useSignal<NoticeState>({});
  const busy = useSignal<'check' | 'unlink' | null>(null);
  const confirming = useSignal(false);
  const now = Date.now();

  const runCheck = async () => {
    busy.value = 'check';
    state.value = {};
    try {
      check.value = (await query(GatewayCheckDocument, { provider: caps.provider })).checkProvider;
      // A refused credential turned the link NEEDS_RELINK.
      refresh();
    } catch (error) {
      state.value = { error: errorText(error) };
    } finally {
      busy.value = null;
    }
  };

  const unlink = async () => {
    busy.value = 'unlink';
    state.value = {};
    try {
      await mutate(GatewayUnlinkDocument, { provider: caps.provider });
      confirming.value = false;
      check.value = null;
      state.value = { ok: `${name} is no longer linked.` };
      reload();
    } catch (error) {
      state.value = { error: errorText(error) };
    } finally {
      busy.value = null;
    }
  };

  const linkLook: StatusLook = caps.link
    ? LINK_STATUS[caps.link.status]
    : { label: 'Not linked', level: null, meaning: 'No account of yours is linked.' };

  return (
    <section class="card provider" aria-labelledby={`provider-${slug}`} data-provider={slug}>
      <div class="row provider-head">
        <h2 id={`provider-${slug}`}>{name}</h2>
        {caps.configured ? <StatusPill look={linkLook} /> : <span class="status own">Not set up on this server</span>}
      </div>
      <Notice state={state.value} />
      {!caps.configured ? (
        <p class="hint">
          {caps.provider === 'KAVITA'
            ? 'The administrator has not given this server a Kavita address (TRELLIS_KAVITA_URL).'
            : 'The administrator has not set this provider up.'}
        </p>
      ) : (
        <>
          {caps.link && (
            <dl class="kv account">
              <dt>Account</dt>
              <dd>
                {caps.link.accountName ?? 'unnamed'}
                {caps.link.accountId ? ` (id ${caps.link.accountId})` : ''}
              </dd>
              <dt>Linked</dt>
              <dd>
                <When at={caps.link.linkedAt} />
              </dd>
              <dt>Last checked</dt>
              <dd>
                <When at={caps.link.checkedAt} />
              </dd>
              {caps.link.expiresAt && (
                <>
                  <dt>Expires</dt>
                  <dd>
                    <When at={caps.link.expiresAt} />
                  </dd>
                </>
              )}
            </dl>
          )}
          {caps.link?.status === 'NEEDS_RELINK' && (
            <p class="alert error">{name} refused the stored credential. Link the account again; its events wait until then.</p>
          )}
          {!caps.linkConfigured && (
            <p class="hint">
              {caps.linkMethod === 'OAUTH'
                ? `Linking is not available: the administrator has not set up the ${name} API client (or the server’s public URL).`
                : 'Linking is not available on this server.'}
            </p>
          )}
          {(!caps.link || caps.link.status === 'NEEDS_RELINK') &&
            (caps.linkMethod === 'API_KEY' ? <KavitaLinkForm
                caps={caps}
                onLinked={(account) => {
                  state.value = { ok: `Kavita is linked: signed in as ${account}.` };
                  check.value = null;
                  reload();
                }}
              /> : <OAuthLinkButton caps={caps} />)}
          <div class="row provider-actions">
            <button type="button" class="btn" disabled={busy.value !== null} onClick={runCheck}>
              {busy.value === 'check' ? 'Checking…' : `Check ${name} now`}
            </button>
            {caps.link && !confirming.value && (
              <button type="button" class="btn danger" onClick={() => (confirming.value = true)}>
                Unlink {name}
              </button>
            )}
          </div>
          {caps.link && confirming.value && (
            <div class="alert info confirm" role="group" aria-label={`Unlink ${name}?`}>
              <p>Unlink {name}? Its stored credential is deleted; events for it wait until you link an account again.</p>
              <div class="row">
                <button type="button" class="btn danger" disabled={busy.value !== null} onClick={unlink}>
                  Yes, unlink {name}
                </button>
                <button type="button" class="btn" onClick={() => (confirming.value = false)}>
                  Keep it linked
                </button>
              </div>
            </div>
          )}
          {check.value && <CheckResult check={check.value} />}
        </>
      )}
      {caps.cooldowns.length > 0 && (
        <div class="alert info" role="note">
          <strong>Cooling down</strong> (the provider asked us to wait; nothing is sent to these hosts until then):
          <ul class="plain">
            {caps.cooldowns.map((cooldown) => (
              <li key={cooldown.host}>{cooldownText(cooldown.host, cooldown.until, now)}</li>
            ))}
          </ul>
        </div>
      )}
      <table class="grid features">
        <caption class="sr-only">What the gateway can do with {name}</caption>
        <thead>
          <tr>
            <th scope="col">Feature</th>
            <th scope="col">Supported</th>
            <th scope="col">Ready for you</th>
            <th scope="col">Limitation</th>
          </tr>
        </thead>
        <tbody>
          {caps.features.map((feature) => (
            <tr key={feature.feature} data-feature={feature.feature}>
              <th scope="row">{FEATURE_LABEL[feature.feature]}</th>
              <td data-label="Supported">{feature.supported ? 'Yes' : 'No'}</td>
              <td data-label="Ready for you">{!feature.supported ? '—' : feature.configured ? 'Yes' : 'Not yet'}</td>
              <td data-label="Limitation">{feature.limitation ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

function SyncNow({ manifest, onDone }: { manifest: Manifest; onDone: () => void }) {
  const state = useSignal<NoticeState>({});
  const running = useSignal<string | null>(null);
  const linked = (provider: string) => manifest.providers.some((caps) => caps.provider === provider && caps.link?.status === 'LINKED');
  const ready = linked('KAVITA') && linked('ANILIST');
  return (
    <section class="card" aria-labelledby="sync-title">
      <h2 id="sync-title">Kavita to AniList</h2>
      <p>
        What you read, rate and want to read on Kavita is carried to AniList on a schedule. Series whose AniList title was found by a search wait
        for you below.
      </p>
      <Notice state={state.value} />
      {running.value && (
        <p class="hint" role="status">
          {running.value}
        </p>
      )}
      <button
        type="button"
        class="btn primary"
        disabled={!ready || running.value !== null}
        aria-describedby={ready ? undefined : 'sync-why'}
        onClick={async () => {
          state.value = {};
          running.value = 'Starting…';
          try {
            const task = (await mutate(GatewayScrobbleDocument, {})).scrobbleKavita;
            running.value = 'Syncing…';
            const done = await watchTask(task.id, (update) => {
              running.value = update.stage ? `Syncing: ${update.stage}…` : 'Syncing…';
            });
            state.value = done.status === 'SUCCEEDED' ? { ok: syncSummary(done.result) } : { error: `Sync ended: ${done.status.toLowerCase()}${done.error ? ` (${done.error})` : ''}.` };
            onDone();
          } catch (error) {
            state.value = { error: errorText(error) };
          } finally {
            running.value = null;
          }
        }}
      >
        Sync now
      </button>
      {!ready && (
        <p class="hint" id="sync-why">
          Link both Kavita and AniList to sync.
        </p>
      )}
    </section>
  );
}

export function Gateway() {
  const { params } = useRoute();
  const only = providerFromParam(params.id);
  const manifest = useSignal<Manifest | null>(null);
  const error = useSignal<unknown>(null);
  // Bumped after a sync or a link change, so the lists below read again.
  const generation = useSignal(0);

  const load = () =>
    query(GatewayManifestDocument, {})
      .then((data) => {
        manifest.value = data.gatewayCapabilities;
        error.value = null;
      })
      .catch((caught) => (error.value = caught));
  useEffect(() => void load(), []);

  const reload = () => {
    void load();
    generation.value += 1;
  };

  const providers = manifest.value?.providers.filter((caps) => only === null || caps.provider === only) ?? [];

  return (
    <div class="page">
      <div class="page-inner gateway">
        <h1>{only ? `Gateway: ${PROVIDER_NAME[only]}` : 'Gateway'}</h1>
        {only && (
          <p>
            <a href="/gateway">All providers, events and receipts</a>
          </p>
        )}
        {error.value && !manifest.value ? (
          <Failed error={error.value} retry={load} />
        ) : !manifest.value ? (
          <Loading label="Loading the providers…" />
        ) : (
          <>
            <p class="hint manifest-note">
              {manifest.value.independentMode ? 'Trellis is the gateway itself: no paid relay is involved. ' : ''}
              Each provider’s features, as this server can offer them to you (manifest version {manifest.value.protocolVersion}).
            </p>
            {providers.map((caps) => (
              <ProviderCard key={caps.provider} caps={caps} refresh={() => void load()} reload={reload} />
            ))}
            {!only && (
              <>
                <SyncNow manifest={manifest.value} onDone={reload} />
                <TitleLinks generation={generation.value} />
                <Events generation={generation.value} />
                <Receipts generation={generation.value} />
              </>
            )}
          </>
        )}
      </div>
    </div>
  );
}
