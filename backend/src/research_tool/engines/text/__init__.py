"""Plain-text analysis for the offline engine: one module per concept (sentences, keyphrases, entities,
facts, slots, domains), no model and no network."""
