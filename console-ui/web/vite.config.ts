import { defineConfig } from 'vite';

declare const process: { env: Record<string, string | undefined> };

// The dev server proxies the API to a running roster:
//   ROSTER_DEV_TARGET=http://127.0.0.1:8848 npm run dev
const target = process.env.ROSTER_DEV_TARGET ?? 'http://127.0.0.1:8848';

export default defineConfig({
  base: '/',
  publicDir: false,
  esbuild: { jsx: 'automatic', legalComments: 'none' },
  build: {
    outDir: '../dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    target: 'es2020',
    cssCodeSplit: false,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 1500,
    rollupOptions: {
      onwarn(warning, warn) {
        // antd marks its modules "use client" (a React Server Components hint): harmless here
        if (warning.code === 'MODULE_LEVEL_DIRECTIVE') return;
        warn(warning);
      },
      output: {
        manualChunks(id) {
          // uPlot stays with the lazily loaded overview page that uses it
          if (id.includes('node_modules/uplot')) return undefined;
          if (id.includes('node_modules')) return 'vendor';
          return undefined;
        },
      },
    },
  },
  server: {
    proxy: {
      '/nacos': { target, changeOrigin: true },
      '/api': { target, changeOrigin: true },
    },
  },
  preview: {
    proxy: {
      '/nacos': { target, changeOrigin: true },
      '/api': { target, changeOrigin: true },
    },
  },
});
