// questions.test.mjs once more, with every server's store a schema of a PostgreSQL database
// (tests/lib/server.mjs storeEnv) rather than SQLite, and the shared session's agent Codex rather
// than OpenCode (the store is what is tested here).
process.env.SANDBOX_MCP_TEST_STORE = 'postgres';
await import('./questions.test.mjs');
