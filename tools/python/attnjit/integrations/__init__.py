"""attnjit inside other libraries' model code: ``attnjit.integrations.transformers`` registers attnjit as a
Hugging Face transformers attention backend."""
