// The debug routes of an agent without rules, apart from dns/explain.ts: an agent without
// --cluster-name loads none of the DNS and rules code (nor dns2 and yaml), see cmd/agent-rules.ts.
import { json, type RouteHandler } from '../observability/health-server.js';

/** `/debug/resolve` and `/debug/rules` of an agent without rules: how to give it some. */
export const noRulesHandler: RouteHandler = (_req, res) =>
  json(res, 404, {
    error:
      'no rules: this agent runs without --cluster-name, so it serves no names and its DNS server is off. Set --cluster-name=NAME (serves NAME and NAME.<agent-namespace>), ' +
      'then expose names with --expose=NAMESPACE/SERVICE, --rules-file=PATH, --rules-configmap=NAMESPACE/NAME or --auto-expose (rules/README.md).',
  });
