// previews.test.mjs once more, with every server's store a schema of a PostgreSQL database
// (tests/lib/server.mjs storeEnv) rather than SQLite.
process.env.SANDBOX_MCP_TEST_STORE = 'postgres';
await import('./previews.test.mjs');
