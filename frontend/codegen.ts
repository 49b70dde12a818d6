// Typed documents from the server's schema: a query the schema does not
// allow fails `npm run build` (and `npm run typecheck`).
import type { CodegenConfig } from '@graphql-codegen/cli';

const config: CodegenConfig = {
  schema: '../schema.graphql',
  // Operations live in `.graphql` files beside the code that uses them.
  documents: ['src/**/*.graphql'],
  ignoreNoDocuments: true,
  generates: {
    'src/gql/': {
      preset: 'client',
      presetConfig: { fragmentMasking: false, gqlTagName: 'graphql' },
      config: {
        // Documents travel as strings: no GraphQL AST in the bundle.
        documentMode: 'string',
        enumsAsTypes: true,
        useTypeImports: true,
        // Each document is tree-shaken into the chunk that uses it.
        pureMagicComment: true,
        scalars: { DateTime: 'string', JSON: 'unknown', ID: 'string' },
      },
    },
  },
  // Errors name the document and the field the schema refuses.
  silent: false,
};

export default config;
