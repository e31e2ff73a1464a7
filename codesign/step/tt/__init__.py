"""codesign/step/tt"""
