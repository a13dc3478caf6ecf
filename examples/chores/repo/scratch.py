print("trying something")
