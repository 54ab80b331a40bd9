"""What a batch says about its questions: item analysis (difficulty, discrimination),
fairness across variants, and the report's section and plots."""
