import { loadSpec, withToken } from "./openapi_spec.js";

const spec = await loadSpec();
window.ui = window.SwaggerUIBundle({
  spec,
  dom_id: "#swagger-ui",
  deepLinking: true,
  layout: "BaseLayout",
  presets: [window.SwaggerUIBundle.presets.apis, window.SwaggerUIBundle.SwaggerUIStandalonePreset],
  requestInterceptor: withToken,
});
