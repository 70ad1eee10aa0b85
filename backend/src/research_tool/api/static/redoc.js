import { loadSpec } from "./openapi_spec.js";

const spec = await loadSpec();
window.Redoc.init(spec, { hideDownloadButton: false }, document.getElementById("redoc"));
