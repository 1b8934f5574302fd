// An OpenID Connect provider for the console's sign-in tests: node-oidc-provider with its
// development login pages (any password is accepted; the login names the account).
//
// Usage: node provider.mjs   with OIDC_TEST_CONFIG holding JSON:
//   {"port": 0, "issuer_path": "", "keys": [<private JWK>], "clients": [<client metadata>],
//    "accounts": {"carol": {"roles": ["approver"]}}}
// Prints one line "listening <issuer>" on stdout once it accepts connections.
import http from 'node:http';
import Provider from 'oidc-provider';

const config = JSON.parse(process.env.OIDC_TEST_CONFIG);
const server = http.createServer();
await new Promise((resolve) => server.listen(config.port, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}${config.issuer_path || ''}`;

const provider = new Provider(issuer, {
  clients: config.clients,
  jwks: { keys: config.keys },
  cookies: { keys: [config.cookie_key] },
  // Scope "roles" grants the roles claim; claims go into the ID token itself, not only /userinfo.
  claims: { openid: ['sub'], profile: ['name'], roles: ['roles'] },
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true } },
  ttl: { IdToken: config.id_token_ttl_s || 3600 },
  async findAccount(ctx, id) {
    const account = config.accounts[id] || { roles: [] };
    return {
      accountId: id,
      async claims() {
        return { sub: id, name: id, roles: account.roles };
      },
    };
  },
});
provider.on('server_error', (ctx, error) => console.error('server_error', error));
server.on('request', provider.callback());
console.log(`listening ${issuer}`);
