// oauth_refresh.test.mjs once more, with every server's store a schema of a PostgreSQL database
// (tests/lib/server.mjs storeEnv) rather than SQLite: the rotation and its overlap are
// conditional updates that must hold on both.
process.env.SANDBOX_MCP_TEST_STORE = 'postgres';
await import('./oauth_refresh.test.mjs');
