/// <reference types="vitest/config" />
import { defineConfig } from 'vite';

// No React plugin: esbuild's automatic JSX runtime is all the app needs, and the Tauri
// webview loads the built files, so fast refresh is not worth a dependency.
export default defineConfig({
  esbuild: { jsx: 'automatic' },
  // Tauri serves dist/ from its own origin; relative asset URLs keep it path-agnostic.
  base: './',
  clearScreen: false,
  server: { port: 1420, strictPort: true },
  build: {
    outDir: 'dist',
    target: 'es2021',
    // Fonts and images must stay files under dist/ (CSP default-src 'self'), never data: URLs.
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 2000,
  },
  test: {
    environment: 'jsdom',
    globals: true,
    setupFiles: ['./test/setup.ts'],
    css: false,
    include: ['src/**/*.test.{ts,tsx}', 'test/**/*.test.{ts,tsx}'],
  },
});
