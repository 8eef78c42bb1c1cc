"""scikit-learn estimators (placeholder)."""
