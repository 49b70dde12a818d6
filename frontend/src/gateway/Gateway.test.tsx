// The gateway's sections against mocked server answers: title links to
// confirm or correct, a refused Kavita key, a link that must be made again,
// and the error state with its retry.
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/preact';
import { LocationProvider, Route, Router } from 'preact-iso';

type Call = { query: string; variables: Record<string, unknown> };
const calls: Call[] = [];
let answers: Record<string, (variables: Record<string, unknown>) => unknown> = {};

vi.mock('../api/client', async () => {
  const actual = await vi.importActual<typeof import('../api/client')>('../api/client');
  const answer = async (doc: { toString(): string }, variables: Record<string, unknown> = {}) => {
    const text = doc.toString();
    calls.push({ query: text, variables });
    const name = /(?:query|mutation) (\w+)/.exec(text)?.[1] ?? '';
    const reply = answers[name];
    if (!reply) throw new Error(`unexpected ${name}`);
    return reply(variables);
  };
  return { ...actual, query: vi.fn(answer), mutate: vi.fn(answer), subscribe: vi.fn(() => () => undefined), onReconnect: vi.fn(() => () => undefined) };
});

const { ApiError } = await import('../api/client');
const { TitleLinks } = await import('./TitleLinks');
const { Gateway } = await import('./Gateway');

const link = (seriesId: string, state: 'PROPOSED' | 'CONFIRMED', mediaId: string | null = '30013', mediaTitle: string | null = 'Oyasumi Punpun') => ({
  seriesId,
  seriesName: `Series ${seriesId}`,
  mediaId,
  mediaTitle,
  state,
  source: state === 'PROPOSED' ? 'SEARCH' : 'WEB_LINK',
  updatedAt: '2026-12-04T09:00:00Z',
});

const features = [
  { feature: 'PROGRESS', supported: true, configured: false, limitation: 'chapters only' },
  { feature: 'SCROBBLE_FROM_KAVITA', supported: false, configured: false, limitation: 'Kavita is the source' },
];

function manifest(kavitaLink: unknown = null) {
  return {
    gatewayCapabilities: {
      protocolVersion: 1,
      independentMode: true,
      providers: [
        { provider: 'KAVITA', configured: true, linkMethod: 'API_KEY', pkce: false, linkConfigured: true, link: kavitaLink, features, cooldowns: [] },
        {
          provider: 'ANILIST',
          configured: true,
          linkMethod: 'OAUTH',
          pkce: false,
          linkConfigured: false,
          link: null,
          features: [],
          cooldowns: [{ host: 'graphql.anilist.co', until: new Date(Date.now() + 120_000).toISOString() }],
        },
      ],
    },
  };
}

const emptyPage = { totalCount: 0, pageInfo: { hasNextPage: false, endCursor: null }, nodes: [] };

beforeEach(() => {
  calls.length = 0;
  answers = {
    GatewayManifest: () => manifest(),
    GatewayTitleLinks: () => ({ titleLinks: [] }),
    GatewayEvents: () => ({ gatewayEvents: emptyPage }),
    GatewayReceipts: () => ({ receipts: emptyPage }),
  };
  history.replaceState(null, '', '/gateway');
});

afterEach(() => cleanup());

function page(path = '/gateway') {
  history.replaceState(null, '', path);
  return render(
    <LocationProvider>
      <Router>
        <Route path="/gateway" component={Gateway} />
        <Route path="/gateway/providers/:id" component={Gateway} />
      </Router>
    </LocationProvider>,
  );
}

describe('TitleLinks', () => {
  test('a proposed link is confirmed; another is set to the media the viewer names', async () => {
    answers.GatewayTitleLinks = () => ({ titleLinks: [link('1', 'PROPOSED'), link('2', 'PROPOSED', null, null), link('3', 'CONFIRMED')] });
    answers.GatewayConfirmTitleLink = (variables) => ({ confirmTitleLink: { ...link(String(variables.seriesId), 'CONFIRMED'), source: 'USER' } });
    answers.GatewaySetTitleLink = (variables) => ({ setTitleLink: { ...link(String(variables.seriesId), 'CONFIRMED', String(variables.mediaId), 'Named'), source: 'USER' } });
    render(<TitleLinks generation={0} />);
    await screen.findByText('To confirm (2)');
    expect(screen.getByText('Confirmed (1)')).toBeTruthy();
    // Nothing to confirm where the search found nothing.
    expect(screen.queryByRole('button', { name: 'Confirm Oyasumi Punpun for Series 2' })).toBeNull();

    fireEvent.click(screen.getByRole('button', { name: 'Confirm Oyasumi Punpun for Series 1' }));
    await screen.findByText(/Series 1 is linked to Oyasumi Punpun/);
    expect(calls.at(-1)?.variables).toEqual({ seriesId: '1' });

    const input = screen.getByLabelText('AniList media id for Series 2') as HTMLInputElement;
    fireEvent.input(input, { target: { value: '42' } });
    fireEvent.submit(input.closest('form')!);
    await screen.findByText(/Series 2 is linked to Named/);
    expect(calls.at(-1)?.variables).toEqual({ seriesId: '2', mediaId: '42' });
    await screen.findByText('To confirm (0)');
  });

  test('an empty list says what fills it', async () => {
    render(<TitleLinks generation={0} />);
    await screen.findByText('No title links yet');
  });
});

describe('Gateway', () => {
  test('shows the manifest: features, limitations, cooldowns, and why AniList cannot be linked', async () => {
    page();
    const kavita = await screen.findByRole('region', { name: 'Kavita' });
    expect(within(kavita).getByText('chapters only')).toBeTruthy();
    expect(within(kavita).getByText('Not linked')).toBeTruthy();
    const anilist = screen.getByRole('region', { name: 'AniList' });
    expect(within(anilist).getByText(/graphql\.anilist\.co, for 2 minutes more/)).toBeTruthy();
    expect(within(anilist).getByText(/has not set up the AniList API client/)).toBeTruthy();
    expect((within(anilist).getByRole('button', { name: 'Link AniList' }) as HTMLButtonElement).disabled).toBe(true);
    expect((screen.getByRole('button', { name: 'Sync now' }) as HTMLButtonElement).disabled).toBe(true);
  });

  test('a refused Kavita key is shown and the field keeps no echo of it', async () => {
    answers.GatewayLinkKavita = () => {
      throw new ApiError('Kavita refused the API key', 'BAD_USER_INPUT');
    };
    page();
    const input = (await screen.findByLabelText('Kavita API key')) as HTMLInputElement;
    expect(input.type).toBe('password');
    fireEvent.input(input, { target: { value: 'wrong' } });
    fireEvent.submit(input.closest('form')!);
    const alert = await screen.findByRole('alert');
    expect(alert.textContent).toBe('Kavita refused the API key');
    expect(calls.find((call) => call.query.includes('linkKavita'))?.variables).toEqual({ apiKey: 'wrong' });
  });

  test('a link the provider refused asks to link again', async () => {
    answers.GatewayManifest = () =>
      manifest({ provider: 'KAVITA', status: 'NEEDS_RELINK', accountName: 'alice', accountId: null, expiresAt: null, linkedAt: '2026-12-01T00:00:00Z', checkedAt: '2026-12-04T00:00:00Z' });
    page();
    const kavita = await screen.findByRole('region', { name: 'Kavita' });
    expect(within(kavita).getByText('Link again')).toBeTruthy();
    expect(within(kavita).getByRole('button', { name: 'Link Kavita again' })).toBeTruthy();
    expect(within(kavita).getByRole('button', { name: 'Unlink Kavita' })).toBeTruthy();
  });

  test('a failed load says so and tries again', async () => {
    let fail = true;
    answers.GatewayManifest = () => {
      if (fail) throw new ApiError('The server cannot be reached.', 'NETWORK', { network: true });
      return manifest();
    };
    page();
    await screen.findByText('The server cannot be reached.');
    fail = false;
    fireEvent.click(screen.getByRole('button', { name: 'Try again' }));
    await screen.findByRole('region', { name: 'Kavita' });
  });

  test('one provider at /gateway/providers/kavita', async () => {
    page('/gateway/providers/kavita');
    await screen.findByRole('region', { name: 'Kavita' });
    expect(screen.queryByRole('region', { name: 'AniList' })).toBeNull();
    await waitFor(() => expect(screen.getByRole('link', { name: 'All providers, events and receipts' })).toBeTruthy());
  });
});
