//! Model configuration and layer plan.
