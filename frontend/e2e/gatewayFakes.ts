// Loopback stand-ins for the gateway's providers, written from what the
// server sends them (`src/gateway/kavita.rs`, `anilist.rs`, `scrobbler.rs`)
// and from the shapes Kavita's and AniList's own APIs answer.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { bodyOf, closeLoopback, listenLoopback, sendJson } from './harness';

export const KAVITA_KEY = 'kavita-key-of-alice-0123456789';

function base64url(text: string): string {
  return Buffer.from(text).toString('base64url');
}

/** A chapter as Kavita's `ChapterDto` has it. */
export interface FakeChapter {
  id: number;
  volumeId: number;
  minNumber: number;
  maxNumber: number;
  number: string;
  pages: number;
  pagesRead: number;
  isSpecial: boolean;
}

/** A series in the account's library, with what `SeriesDto`, `VolumeDto` and the metadata's web links say. */
export interface FakeSeries {
  id: number;
  name: string;
  userRating: number;
  /** Kavita keeps a series' web links as one comma-separated text. */
  webLinks: string;
  volumes: { id: number; minNumber: number; chapters: FakeChapter[] }[];
}

/** Chapters `1..total` of one volume, the first `read` of them fully read. */
export function chapters(volumeId: number, total: number, read: number): FakeChapter[] {
  return Array.from({ length: total }, (_, index) => ({
    id: volumeId * 100 + index + 1,
    volumeId,
    minNumber: index + 1,
    maxNumber: index + 1,
    number: String(index + 1),
    pages: 20,
    pagesRead: index < read ? 20 : 0,
    isSpecial: false,
  }));
}

function pagesRead(series: FakeSeries): number {
  return series.volumes.flatMap((volume) => volume.chapters).reduce((sum, chapter) => sum + chapter.pagesRead, 0);
}

/**
 * Kavita as the gateway uses it: `POST /api/Plugin/authenticate` trades an
 * API key for a JWT; everything else needs that JWT as a bearer token (401
 * without it): Want to Read (`GET /api/want-to-read`, `POST
 * /api/want-to-read/add-series`, `POST /api/want-to-read/v2`), the library
 * (`POST /api/Series/all-v2`, paged), a series' volumes and its metadata.
 */
export class FakeKavita {
  private server = createServer((request, response) => void this.handle(request, response));
  url = '';
  readonly tokens = new Set<string>();
  readonly wantToRead = new Set<number>();
  readonly library: FakeSeries[] = [];
  /** Every request, as `METHOD path?query` (keys included: the fake is ours). */
  readonly requests: string[] = [];

  async start(): Promise<this> {
    this.url = await listenLoopback(this.server);
    return this;
  }

  private seriesDto(series: FakeSeries) {
    return { id: series.id, name: series.name, pagesRead: pagesRead(series), userRating: series.userRating, libraryId: 1 };
  }

  private page(url: URL, all: FakeSeries[]) {
    const number = Number(url.searchParams.get('PageNumber') ?? '1');
    const size = Number(url.searchParams.get('PageSize') ?? '50');
    return all.slice((number - 1) * size, number * size).map((series) => this.seriesDto(series));
  }

  private async handle(request: IncomingMessage, response: ServerResponse) {
    const url = new URL(request.url ?? '/', this.url);
    this.requests.push(`${request.method} ${url.pathname}${url.search}`);
    const body = await bodyOf(request);

    if (request.method === 'POST' && url.pathname === '/api/Plugin/authenticate') {
      if (url.searchParams.get('apiKey') !== KAVITA_KEY || !url.searchParams.get('pluginName')) {
        response.writeHead(401).end();
        return;
      }
      const exp = Math.floor(Date.now() / 1000) + 10 * 24 * 3600;
      const token = `${base64url('{"alg":"HS512","typ":"JWT"}')}.${base64url(JSON.stringify({ nameid: 'alice', exp }))}.${base64url(randomBytes(8).toString('hex'))}`;
      this.tokens.add(token);
      sendJson(response, 200, { username: 'alice', token });
      return;
    }

    const bearer = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
    if (!bearer || !this.tokens.has(bearer)) {
      response.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"' }).end();
      return;
    }
    const seriesId = Number(url.searchParams.get('seriesId'));
    const series = this.library.find((entry) => entry.id === seriesId);
    if (request.method === 'GET' && url.pathname === '/api/want-to-read') {
      sendJson(response, 200, this.wantToRead.has(seriesId));
      return;
    }
    if (request.method === 'POST' && url.pathname === '/api/want-to-read/add-series') {
      const { seriesIds } = JSON.parse(body || '{}') as { seriesIds?: number[] };
      for (const id of seriesIds ?? []) this.wantToRead.add(id);
      sendJson(response, 200, true);
      return;
    }
    if (request.method === 'POST' && url.pathname === '/api/want-to-read/v2') {
      sendJson(response, 200, this.page(url, this.library.filter((entry) => this.wantToRead.has(entry.id))));
      return;
    }
    if (request.method === 'POST' && url.pathname === '/api/Series/all-v2') {
      sendJson(response, 200, this.page(url, this.library));
      return;
    }
    if (request.method === 'GET' && url.pathname === '/api/Series/volumes') {
      if (!series) return void response.writeHead(204).end();
      sendJson(
        response,
        200,
        series.volumes.map((volume) => ({ id: volume.id, minNumber: volume.minNumber, number: volume.minNumber, seriesId: series.id, chapters: volume.chapters })),
      );
      return;
    }
    if (request.method === 'GET' && url.pathname === '/api/Series/metadata') {
      if (!series) return void response.writeHead(204).end();
      sendJson(response, 200, { id: series.id, seriesId: series.id, summary: '', webLinks: series.webLinks });
      return;
    }
    response.writeHead(404).end();
  }

  async stop(): Promise<void> {
    await closeLoopback(this.server);
  }
}

export const ANILIST_CLIENT = { id: 'e2e-client', secret: 'e2e-client-secret' };

/** An AniList media, as its public catalog answers it. */
function media(id: number, romaji: string, english: string) {
  return {
    id,
    idMal: id,
    type: 'MANGA',
    format: 'MANGA',
    status: 'RELEASING',
    title: { romaji, english, native: romaji },
    synonyms: [],
    chapters: null,
    volumes: null,
    siteUrl: `https://anilist.co/manga/${id}`,
    coverImage: { large: null },
  };
}

/** One `SaveMediaListEntry` the fake applied. */
export interface SavedEntry {
  mediaId: number;
  progress?: number;
  score?: number;
  status?: string;
}

/**
 * AniList: the OAuth pages (`/api/v2/oauth/authorize` sends the browser
 * straight back with a code, as a user who consents; `/api/v2/oauth/token`
 * trades it, JSON in and out) and the GraphQL API at `/graphql`: `Viewer`,
 * `Media(id)`, `Page { media(search) }`, `MediaList(userId, mediaId)` (404
 * `Not Found.` when there is none) and `SaveMediaListEntry`, the personal
 * ones for a valid bearer token only (400 `Invalid token` otherwise).
 */
export class FakeAniList {
  private server = createServer((request, response) => void this.handle(request, response));
  url = '';
  readonly viewer = { id: 5150, name: 'alice-on-anilist' };
  readonly media = [media(30013, 'ONE PIECE', 'One Piece'), media(104463, 'Yotsuba to!', 'Yotsuba&!')];
  private readonly codes = new Set<string>();
  private readonly tokens = new Set<string>();
  /** mediaId → the viewer's list entry. */
  readonly entries = new Map<number, Record<string, unknown>>();
  /** Every `SaveMediaListEntry`, in order. */
  readonly saves: SavedEntry[] = [];
  /** Every authorize page visit's query. */
  readonly authorizations: URLSearchParams[] = [];

  async start(): Promise<this> {
    this.url = await listenLoopback(this.server);
    return this;
  }

  private async handle(request: IncomingMessage, response: ServerResponse) {
    const url = new URL(request.url ?? '/', this.url);
    const body = await bodyOf(request);
    if (request.method === 'GET' && url.pathname === '/api/v2/oauth/authorize') {
      this.authorizations.push(url.searchParams);
      const back = new URL(url.searchParams.get('redirect_uri') ?? '');
      if (url.searchParams.get('client_id') !== ANILIST_CLIENT.id || url.searchParams.get('response_type') !== 'code') {
        back.searchParams.set('error', 'invalid_request');
      } else {
        const code = `code-${randomBytes(8).toString('hex')}`;
        this.codes.add(code);
        back.searchParams.set('code', code);
      }
      back.searchParams.set('state', url.searchParams.get('state') ?? '');
      response.writeHead(302, { location: back.toString() }).end();
      return;
    }
    if (request.method === 'POST' && url.pathname === '/api/v2/oauth/token') {
      const form = JSON.parse(body || '{}') as Record<string, string>;
      const ok =
        form.grant_type === 'authorization_code' &&
        form.client_id === ANILIST_CLIENT.id &&
        form.client_secret === ANILIST_CLIENT.secret &&
        typeof form.redirect_uri === 'string' &&
        this.codes.delete(form.code);
      if (!ok) return sendJson(response, 400, { error: 'invalid_grant', message: 'The authorization grant is invalid.' });
      const token = `anilist-token-${randomBytes(8).toString('hex')}`;
      this.tokens.add(token);
      sendJson(response, 200, { token_type: 'Bearer', expires_in: 31_536_000, access_token: token, refresh_token: 'unused' });
      return;
    }
    if (request.method === 'POST' && url.pathname === '/graphql') {
      this.graphql(request, JSON.parse(body || '{}') as { query?: string; variables?: Record<string, unknown> }, response);
      return;
    }
    response.writeHead(404).end();
  }

  private graphql(request: IncomingMessage, { query = '', variables = {} }: { query?: string; variables?: Record<string, unknown> }, response: ServerResponse) {
    const answer = (status: number, data: unknown, message?: string) =>
      sendJson(response, status, message ? { errors: [{ message, status }], data } : { data });
    const bearer = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
    if (bearer !== undefined && !this.tokens.has(bearer)) return answer(400, null, 'Invalid token');
    const signedIn = bearer !== undefined;
    const personal = /SaveMediaListEntry|MediaList\(|Viewer/.test(query);
    if (personal && !signedIn) return answer(401, null, 'Unauthorized.');

    if (query.includes('SaveMediaListEntry')) {
      const mediaId = Number(variables.mediaId);
      if (!this.media.some((entry) => entry.id === mediaId)) return answer(404, { SaveMediaListEntry: null }, 'Not Found.');
      const saved: SavedEntry = { mediaId };
      const entry = this.entries.get(mediaId) ?? { id: 9000 + this.entries.size, mediaId, status: 'CURRENT', progress: 0, score: 0, notes: null };
      if (typeof variables.progress === 'number') entry.progress = saved.progress = variables.progress;
      if (typeof variables.score === 'number') entry.score = saved.score = variables.score;
      if (query.includes('status: PLANNING')) entry.status = saved.status = 'PLANNING';
      this.entries.set(mediaId, entry);
      this.saves.push(saved);
      return answer(200, { SaveMediaListEntry: entry });
    }
    if (query.includes('MediaList(')) {
      const entry = Number(variables.userId) === this.viewer.id ? this.entries.get(Number(variables.mediaId)) : undefined;
      return entry ? answer(200, { MediaList: entry }) : answer(404, { MediaList: null }, 'Not Found.');
    }
    if (query.includes('Viewer')) {
      return answer(200, { Viewer: { ...this.viewer, mediaListOptions: { scoreFormat: 'POINT_10' } } });
    }
    if (query.includes('Media(id')) {
      const found = this.media.find((entry) => entry.id === Number(variables.id));
      return found ? answer(200, { Media: found }) : answer(404, { Media: null }, 'Not Found.');
    }
    if (query.includes('Page(')) {
      const search = String(variables.search ?? '').toLowerCase();
      const found = this.media.filter((entry) => Object.values(entry.title).some((title) => title.toLowerCase().includes(search)));
      return answer(200, { Page: { media: found } });
    }
    answer(400, null, 'a query this fake does not know');
  }

  async stop(): Promise<void> {
    await closeLoopback(this.server);
  }
}
