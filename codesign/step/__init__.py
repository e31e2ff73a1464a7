"""codesign/step"""
