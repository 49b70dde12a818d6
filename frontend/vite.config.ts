import { resolve } from 'node:path';
import { defineConfig, type Plugin } from 'vitest/config';

// The generated documents are plain constants; marked pure, each lands only
// in the chunk that uses it.
function pureDocuments(): Plugin {
  return {
    name: 'trellis-pure-documents',
    transform(code, id) {
      if (!id.endsWith('/src/gql/graphql.ts')) return null;
      return { code: code.replaceAll('= new TypedDocumentString(', '= /*#__PURE__*/ new TypedDocumentString('), map: null };
    },
  };
}

// The reader is a lazy chunk (its evaluation is a task of its own), but the
// app's page always wants it: index.html preloads it and its imports beside
// the entry, so it is not a second round trip after the entry runs.
function preloadReader(): Plugin {
  return {
    name: 'trellis-preload-reader',
    apply: 'build',
    transformIndexHtml: {
      order: 'post',
      handler(html, context) {
        if (!context.bundle || !context.filename.endsWith('index.html')) return html;
        const chunks = Object.values(context.bundle).filter((file) => file.type === 'chunk');
        const reader = chunks.find((chunk) => chunk.type === 'chunk' && chunk.isDynamicEntry && chunk.name === 'Reader');
        if (!reader || reader.type !== 'chunk') return html;
        const present = new Set([...html.matchAll(/(?:src|href)="\/([^"]+)"/g)].map((match) => match[1]));
        const files = [reader.fileName, ...reader.imports].filter((file) => file.endsWith('.js') && !present.has(file));
        return {
          html,
          tags: files.map((file) => ({ tag: 'link', attrs: { rel: 'modulepreload', crossorigin: true, href: `/${file}` }, injectTo: 'head' as const })),
        };
      },
    },
  };
}

// Two entries: the app (`index.html`) and the GraphQL playground
// (`graphiql.html`, served at `GET /graphql`, outside the app's budget).
// Every script and style is a hashed file under `/assets/`: nothing inline,
// so the server's CSP allows `'self'` only.
export default defineConfig({
  plugins: [pureDocuments(), preloadReader()],
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    target: 'es2022',
    outDir: 'dist',
    assetsDir: 'assets',
    emptyOutDir: true,
    modulePreload: { polyfill: false },
    cssCodeSplit: true,
    assetsInlineLimit: 0,
    sourcemap: false,
    // dist/.vite/manifest.json: the bundle budget (.size-limit.mjs) reads it.
    manifest: true,
    rollupOptions: {
      // GraphiQL's React packages carry `"use client"`, meaningless here.
      onwarn(warning, warn) {
        if (warning.code !== 'MODULE_LEVEL_DIRECTIVE') warn(warning);
      },
      input: {
        index: resolve(import.meta.dirname, 'index.html'),
        graphiql: resolve(import.meta.dirname, 'graphiql.html'),
      },
    },
  },
  server: {
    // `npm run dev` against a server on :8080.
    proxy: {
      '/graphql': { target: 'http://127.0.0.1:8080', ws: true },
      '/icons': 'http://127.0.0.1:8080',
    },
  },
  test: {
    environment: 'happy-dom',
    include: ['src/**/*.test.{ts,tsx}'],
  },
});
