// Preload module for the MCP conformance CLI: adds "Authorization: Bearer <token>" to its requests.
//
// Why it exists: sandbox-mcp requires a bearer token on /mcp, but the conformance CLI has no
// option to send headers. Its SDK client is built with no requestInit, and some scenarios call
// fetch() or undici.request() directly. Turning auth off for the test run would skip the code
// path we ship, so instead this module is loaded into the CLI's Node process ahead of the CLI:
//
//   MCP_CONFORMANCE_BEARER=<token> NODE_OPTIONS="--import /abs/path/auth-header.mjs" node <cli> ...
//
// How: Node's built-in fetch and the npm undici package both send through the dispatcher
// registered at globalThis[Symbol.for('undici.globalDispatcher.1')]. We register one that adds the
// header when a request lacks it. Some newer suite versions also use node:http's request(), which
// we wrap the same way. A request that already carries an Authorization header is sent
// unchanged. `undici` is resolved from tests/node_modules, next to this file's directory.
import http from 'node:http';
import { Agent, setGlobalDispatcher } from 'undici';

const token = process.env.MCP_CONFORMANCE_BEARER;

if (token) {
  const value = `Bearer ${token}`;

  // undici accepts headers as a flat [name, value, ...] array, an object, or nothing.
  const withAuth = (headers) => {
    if (Array.isArray(headers)) {
      for (let i = 0; i < headers.length; i += 2)
        if (String(headers[i]).toLowerCase() === 'authorization') return headers;
      return [...headers, 'authorization', value];
    }
    if (headers && typeof headers === 'object') {
      if (Object.keys(headers).some((k) => k.toLowerCase() === 'authorization')) return headers;
      return { ...headers, authorization: value };
    }
    return { authorization: value };
  };

  const interceptor = (dispatch) => (opts, handler) =>
    dispatch({ ...opts, headers: withAuth(opts.headers) }, handler);

  setGlobalDispatcher(new Agent().compose(interceptor));

  // node:http: the headers of a ClientRequest can still be changed until it is written to.
  const request = http.request;
  http.request = function requestWithAuth(...args) {
    const req = request.apply(this, args);
    if (!req.headersSent && !req.hasHeader('authorization')) req.setHeader('authorization', value);
    return req;
  };
  // http.get() calls the original request() internally, so route it through the wrapper.
  http.get = function getWithAuth(...args) {
    const req = http.request(...args);
    req.end();
    return req;
  };
}
