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

// Two entries: the app (`index.html`) and the GraphQL playground
// (`graphiql.html`, served at `GET /graphql`, outside the app's budget).
// Every script and style is a hashed file under `/assets/`: nothing inline,
// so the server's CSP allows `'self'` only.
export default defineConfig({
  plugins: [pureDocuments()],
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
