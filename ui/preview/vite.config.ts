import { defineConfig } from 'vite';

// The UI in a plain browser against the in-memory backend of the tests, for working on
// layout and for screenshots without building the Rust app. Never part of dist/.
// Paths are relative to ui/, where the npm scripts run.
export default defineConfig({
  root: 'preview',
  esbuild: { jsx: 'automatic' },
  base: './',
  server: { port: 1421 },
  build: {
    outDir: '../node_modules/.preview-dist',
    emptyOutDir: true,
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 4000,
  },
});
